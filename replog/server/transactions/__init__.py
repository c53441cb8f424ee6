"""The broker's transaction coordinator shell (`transaction_coordinator`, served by
`kafka_txn_apis`) and its marker writes to partition leaders (`marker_sender`)."""
