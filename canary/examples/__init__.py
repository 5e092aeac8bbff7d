"""Sample applications built on the kafka-canary library, shipped with it: the client rollout deploys the sample
services (canary.examples.services) unless told otherwise."""
