"""`sasl.jaas.config` read as Kafka's JaasConfig reads it, and PLAIN checked as Kafka's
PlainServerCallbackHandler checks it."""

from __future__ import annotations

import pytest

from replog.errors import ConfigError, IllegalSaslStateError, SaslAuthenticationFailedError
from replog.security.jaas_config import PLAIN_LOGIN_MODULE, parse_jaas_config
from replog.security.plain_server import PlainServer

KEY = "listener.name.sasl.plain.sasl.jaas.config"


def test_a_plain_login_module_gives_its_user_entries() -> None:
    jaas = parse_jaas_config(
        f'{PLAIN_LOGIN_MODULE} required username="admin" password="admin-secret" '
        'user_admin="admin-secret" user_alice="a \\"quoted\\" one" user_bob=bare;',
        KEY,
    )
    assert jaas.login_module == PLAIN_LOGIN_MODULE and jaas.control_flag == "required"
    assert jaas.plain_users() == {"admin": "admin-secret", "alice": 'a "quoted" one', "bob": "bare"}
    assert "admin-secret" not in repr(jaas)


@pytest.mark.parametrize(
    ("text", "cause"),
    [
        ("", "empty"),
        (f"{PLAIN_LOGIN_MODULE} required user_a=b", "contains 0 login modules"),
        (f"{PLAIN_LOGIN_MODULE} required; {PLAIN_LOGIN_MODULE} required;", "contains 2"),
        (f"{PLAIN_LOGIN_MODULE} mandatory;", "control flag 'mandatory'"),
        (f'{PLAIN_LOGIN_MODULE} required user_a="secret" dangling;', "key=value"),
        (f'{PLAIN_LOGIN_MODULE} required user_a"secret";', "key=value"),
    ],
)
def test_a_malformed_value_is_refused_naming_the_key_and_no_password(text: str, cause: str) -> None:
    with pytest.raises(ConfigError, match=cause) as caught:
        parse_jaas_config(text, KEY)
    assert KEY in str(caught.value) and "secret" not in str(caught.value)


def test_plain_checks_the_password_and_answers_once() -> None:
    server = PlainServer({"alice": "pw"})
    assert server.respond(b"\0alice\0pw") == b"" and server.authorization_id == "alice"
    with pytest.raises(IllegalSaslStateError):
        server.respond(b"\0alice\0pw")
    for token in (b"\0alice\0PW", b"\0carol\0pw"):
        with pytest.raises(SaslAuthenticationFailedError, match="Invalid username or password"):
            PlainServer({"alice": "pw"}).respond(token)
