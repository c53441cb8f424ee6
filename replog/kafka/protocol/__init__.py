"""The hand-written runtime of the generated Kafka codecs: primitive types (`codec`) and the
request/response headers, frames and lookup by API key and version (`framing`)."""
