"""Requests that survive any Content-Type a sender writes."""


class SenderSafeContentType:
    """Mixed into Django's request classes (WSGI and ASGI): a charset that cannot even be looked
    up (one holding a NUL makes `codecs.lookup` raise ValueError, not the LookupError Django
    catches) is ignored, as Django ignores an unknown one, instead of a 500 before any middleware
    or view runs, and the body lost. `manage.py runserver` (`make run`) passes such a header
    through; gunicorn refuses it first."""

    def _set_content_type_params(self, meta):
        try:
            super()._set_content_type_params(meta)
        except ValueError:
            self.content_params.pop("charset", None)  # content_type and the rest were read first
