"""The Django app: models, webhooks, services, tasks, views, API, admin and commands."""
