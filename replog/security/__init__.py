"""Security's pure cores: who a connection is (`principal`), what it may do (`acl_index`,
`authorizer`: Kafka's StandardAuthorizer over the ACLs of the metadata log), and SCRAM
(`scram_credential`, `scram_messages`, `scram_server`, `scram_client`: KIP-84's exchanges).

Rules:
- Pure: no I/O, clock or randomness; nonces and salts come from the caller, so every exchange
  replays from its inputs. The shells (the Kafka listener, the client) own sockets and TLS.
- Semantics and codes are Kafka's (docs/security.md lists what is built and what is not).
- Nothing here logs or keeps a password; a credential's repr names no key.
"""
