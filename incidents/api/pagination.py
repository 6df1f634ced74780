from rest_framework.pagination import PageNumberPagination


class Pagination(PageNumberPagination):
    """`{"count", "next", "previous", "results"}` with `?page_size=` up to 500, as the contract says."""

    page_size = 50
    page_size_query_param = "page_size"
    max_page_size = 500
