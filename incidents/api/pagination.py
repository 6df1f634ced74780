from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.pagination import PageNumberPagination


class Pagination(PageNumberPagination):
    """`{"count", "next", "previous", "results"}` with `?page_size=` up to 500, as the contract says.

    DRF quietly falls back to the default for a `page_size` it cannot read and caps one over the
    maximum, and answers a bad `page` with a bare "Invalid page."; a client gets told instead:
    400 for a page or page size that is not a whole number in range, 404 naming the last page for
    a page past it."""

    page_size = 50
    page_size_query_param = "page_size"
    max_page_size = 500

    def get_page_size(self, request) -> int:
        raw = request.query_params.get(self.page_size_query_param)
        if raw is None:
            return self.page_size
        size = whole_number(raw)
        if size is None or not 1 <= size <= self.max_page_size:
            raise ValidationError(
                {"page_size": f"expected a whole number from 1 to {self.max_page_size}, got {raw[:40]!r}"}
            )
        return size

    def paginate_queryset(self, queryset, request, view=None):
        raw = request.query_params.get(self.page_query_param)
        if raw is not None and raw not in self.last_page_strings:
            number = whole_number(raw)
            if number is None or number < 1:
                raise ValidationError({"page": f"expected a whole number from 1, got {raw[:40]!r}"})
        try:
            return super().paginate_queryset(queryset, request, view)
        except NotFound:
            pages = self.django_paginator_class(queryset, self.get_page_size(request)).num_pages
            raise NotFound(f"page {raw[:40]!r} is past the last page ({pages})") from None


def whole_number(raw: str) -> int | None:
    text = raw.strip()
    return int(text) if text.isascii() and text.isdigit() and len(text) <= 18 else None
