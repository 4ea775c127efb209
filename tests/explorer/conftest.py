import pytest


@pytest.fixture
def user(django_user_model):
    return django_user_model.objects.create_user("ada", password="pw-not-secret")


@pytest.fixture
def signed_in(client, user):
    client.force_login(user)
    return client
