"""A broker that stopped is named with its own reason, read from the end of its log."""

from canary.kafka.broker_log import fatal_cause, fatal_cause_in

SERVER_LOG = """\
[2026-11-26 20:35:17,990] INFO KafkaConfig values: (org.apache.kafka.common.config.AbstractConfig)
[2026-11-26 20:35:18,104] ERROR Exiting Kafka due to fatal exception (kafka.Kafka$)
java.lang.IllegalArgumentException: requirement failed: replica.socket.timeout.ms should always be at least \
replica.fetch.wait.max.ms to prevent unnecessary socket timeouts
\tat scala.Predef$.require(Predef.scala:337)
\tat kafka.server.KafkaConfig.validateValues(KafkaConfig.scala:1012)
"""


def test_the_cause_is_the_line_after_kafka_s_fatal_exit():
    assert fatal_cause(SERVER_LOG.splitlines()) == (
        "java.lang.IllegalArgumentException: requirement failed: replica.socket.timeout.ms should always be at least "
        "replica.fetch.wait.max.ms to prevent unnecessary socket timeouts")


def test_without_a_fatal_exit_the_last_exception_line_that_is_not_a_stack_frame():
    lines = ["INFO starting", "org.apache.kafka.common.KafkaException: Failed to bind to 127.0.0.1:9092",
             "\tat kafka.network.Acceptor.openServerSocket(SocketServer.scala:700)", "INFO shutting down"]
    assert fatal_cause(lines) == "org.apache.kafka.common.KafkaException: Failed to bind to 127.0.0.1:9092"
    assert fatal_cause(["INFO all is well"]) is None


def test_a_node_s_log_folder_server_log_first_then_stdout(tmp_path):
    assert fatal_cause_in(tmp_path) is None  # no logs at all
    (tmp_path / "stdout.log").write_text("Error: Could not find or load main class kafka.Kafka\n")
    assert fatal_cause_in(tmp_path) == "Error: Could not find or load main class kafka.Kafka"
    (tmp_path / "server.log").write_text(SERVER_LOG)
    assert fatal_cause_in(tmp_path).startswith("java.lang.IllegalArgumentException: requirement failed")
