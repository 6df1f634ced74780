"""gunicorn's access log without a line per accepted webhook (`bin/serve --logger-class`).

Every webhook request is kept as a Delivery row with its headers, and refusals (4xx, 5xx) are
logged by Django (`django.request`); the access log line for each 2xx webhook answer repeated
that, at a cost in web CPU that shows on every 1-alert delivery (bench/ingest). Pages, the API and
every webhook error keep their access log lines. Imports nothing from Django: gunicorn loads
it in the arbiter."""

from gunicorn.glogging import Logger


class AccessLogger(Logger):
    def access(self, resp, req, environ, request_time):
        if (resp.status_code or 500) < 400 and environ.get("PATH_INFO", "").startswith("/hooks/"):
            return
        super().access(resp, req, environ, request_time)
