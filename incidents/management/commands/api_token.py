from django.core.management.base import BaseCommand, CommandError

from incidents import services


class Command(BaseCommand):
    help = (
        "Mint a new API token for USERNAME and print it, once: only its hash is kept (the bare token is "
        "the last line). --rotate revokes the user's other tokens; --create-user makes a responder."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("username")
        parser.add_argument("--create-user", action="store_true", dest="create_user")
        parser.add_argument("--rotate", action="store_true", help="revoke every other token of the user")

    def handle(self, *args, username: str, create_user: bool, rotate: bool, **options) -> None:
        try:
            token = services.api_token_issue(username=username, create_user=create_user, rotate=rotate)
        except services.RootlineError as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(token)
