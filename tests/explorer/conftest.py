import pytest


@pytest.fixture
def user(django_user_model):
    """A site admin (superuser: every cluster, every role); tests/explorer/test_access.py walks the
    pages as members and non-members."""
    return django_user_model.objects.create_superuser("ada", password="pw-not-secret")


@pytest.fixture
def signed_in(client, user):
    client.force_login(user)
    return client
