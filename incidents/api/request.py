"""How the API reads a request: its credentials and its JSON body. DRF's own classes, made to
answer a client's mistake with a 4xx instead of a 500."""

from __future__ import annotations

from rest_framework import authentication, parsers
from rest_framework.exceptions import AuthenticationFailed, ParseError

from correlate.ingest.common import MAX_JSON_DEPTH, PayloadError, _check_parsed_depth
from incidents.services.api_tokens import api_token_user


class TokenAuthentication(authentication.TokenAuthentication):
    """`Authorization: Token <key>`, the key checked against the hashed tokens `manage.py
    api_token` mints (`api_token_user`), not DRF's table of keys in clear. A key holding NUL
    reached PostgreSQL, which refuses it in text (a 500); a header that is not Latin-1 text
    failed DRF's encoding of it (a 500 too)."""

    def authenticate(self, request):
        try:
            return super().authenticate(request)
        except UnicodeEncodeError:
            raise AuthenticationFailed(
                "Invalid token header. Token string should not contain invalid characters."
            ) from None

    def authenticate_credentials(self, key: str):
        if "\x00" in key:
            raise AuthenticationFailed("Invalid token.")
        user = api_token_user(key)
        if user is None:
            raise AuthenticationFailed("Invalid token.")
        return user, None


class JSONParser(parsers.JSONParser):
    """DRF's parser lets Python's RecursionError through on a deeply nested body (a 500); bodies
    nested deeper than the webhooks take (64 levels) are refused here, before any code walks them."""

    def parse(self, stream, media_type=None, parser_context=None):
        try:
            data = super().parse(stream, media_type, parser_context)
        except RecursionError:
            raise ParseError(f"JSON parse error - body: nested deeper than {MAX_JSON_DEPTH} levels") from None
        try:
            _check_parsed_depth(data)
        except PayloadError as exc:
            raise ParseError(f"JSON parse error - {exc.message}") from None
        return data
