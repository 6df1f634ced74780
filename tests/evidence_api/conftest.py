from tests.incidents.conftest import api, users  # noqa: F401  (same fixtures as the incidents tests)
