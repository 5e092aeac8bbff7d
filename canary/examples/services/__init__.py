"""Sample services for the client rollout (docs/clients.md): a producer service writing keyed orders with a
LaneProducer and a consumer service processing them with a LaneConsumer, both with observations on.

Versions (`--version`), the behaviour a rollout compares:

| version | producer | consumer |
|---|---|---|
| v1, v2 | well-formed JSON orders | parses each order, ~1 ms of work |
| v2-bad | 5 % of the records are malformed (not JSON) | slow (~20 ms per record) and fails 5 % of the orders |

Run by canary.clients.deployer.ServiceDeployer: `python -m canary.examples.services.producer --help`.
"""
