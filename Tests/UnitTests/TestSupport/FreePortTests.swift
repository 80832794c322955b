import TestSupport
import Testing

/// The ports tests give their servers: never the same one twice in a process (two tests that got
/// one each and start their servers slowly on a loaded machine collided), and never one a
/// reservation holds while its server is down (a private cluster between a stop and a start).
@Suite struct FreePortTests {
    /// 500 ports out of the ~12,800 below the ephemeral range: drawn at random, two would be the
    /// same with a probability above 99.99 %.
    @Test func aPortIsHandedOutOnce() {
        let ports = (0..<500).map { _ in freePort() }
        #expect(Set(ports).count == ports.count)
    }

    @Test func aReservedPortIsNotFreeUntilReleased() throws {
        var reservation: PortReservation? = try PortReservation()
        let port = try #require(reservation?.port)
        #expect(!isFreePort(port))
        reservation = nil
        #expect(isFreePort(port))
    }
}
