"""Sample applications built on the kafka-canary library."""
