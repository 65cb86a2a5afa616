"""Log parsers (one module per format) and shippers into Kafka."""
