from django.core.management.base import BaseCommand, CommandError

from incidents import services


class Command(BaseCommand):
    help = (
        "Print an API token for USERNAME (its bare token is the last line); --create-user makes a responder."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("username")
        parser.add_argument("--create-user", action="store_true", dest="create_user")

    def handle(self, *args, username: str, create_user: bool, **options) -> None:
        try:
            token = services.api_token_issue(username=username, create_user=create_user)
        except services.RootlineError as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(token)
