package kafkacanary.lanes;

/**
 * What a thread produced since its consumer's last poll returned (canary/clients/outputs.py for the JVM): the
 * producer interceptor counts each record sent and when, the consumer interceptor reads and resets it when its next
 * batch arrives. A service that produces in another thread than the one that polls is not counted.
 */
final class Outputs {
    static final class Count {
        long records;
        double lastMs;  // when the thread last produced or committed: the end of its processing, as far as seen
    }

    private static final ThreadLocal<Count> COUNT = ThreadLocal.withInitial(Count::new);

    private Outputs() {}

    static void produced() {
        Count c = COUNT.get();
        c.records++;
        c.lastMs = Observations.nowMs();
    }

    static void active() {
        COUNT.get().lastMs = Observations.nowMs();
    }

    /** This thread's count since the last take, then a new one. */
    static Count take() {
        Count c = COUNT.get();
        COUNT.set(new Count());
        return c;
    }
}
