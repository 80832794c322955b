import AppStoreServer
import AsyncHTTPClient
import Foundation
import Logging
import NIOCore
import NIOFoundationCompat
import NIOHTTP1

/// Apple's delivery of notifications to the app's webhook, replayed at start-up in the order the
/// attempts happened, every app's and environment's to the one webhook (Apple sends sandbox
/// notifications to the production URL when no sandbox URL is set): the first attempt shortly
/// after signing, then (production only) retries 1, 12, 24, 48 and 72 hours after the previous
/// failure. Attempts inside the outage fail; others are really POSTed to the webhook (or count as
/// delivered when there is none).
extension MockAppStore {
    /// Hours between a failed attempt and the next one, in production.
    static let retryDelays: [Int64] = [1, 12, 24, 48, 72].map { $0 * 3_600_000 }

    func deliverLiveTraffic() async {
        let scenario = configuration.scenario
        let worlds = simulatedWorlds
        let notifications = worlds.map { $0.catalog.snapshot.notifications }
        struct Attempt {
            var time: Int64
            var world: Int
            var index: Int
            var number: Int
        }
        var queue = worlds.indices.flatMap { world in
            notifications[world].indices.filter { notifications[world][$0].firstAttemptDate <= scenario.now }
                .map { Attempt(time: notifications[world][$0].firstAttemptDate, world: world, index: $0, number: 1) }
        }
        // In history order (which need not be first-attempt order: `HistoryDate.signedDate`), app by app at one instant.
        .sorted { ($0.time, $0.world, $0.index) < ($1.time, $1.world, $1.index) }
        var position = 0
        var delivered = 0
        while position < queue.count {
            let attempt = queue[position]
            position += 1
            let world = worlds[attempt.world]
            let notification = notifications[attempt.world][attempt.index]
            let uuid = notification.plan.notificationUUID
            let result: SendAttemptResult
            if scenario.isInOutage(attempt.time) {
                result = Self.outageFailure(uuid: uuid, attempt: attempt.number)
            } else if let webhook = configuration.webhookURL {
                result = await post(notification.signedPayload, to: webhook, timeout: configuration.deliveryTimeout)
                if result != .success {
                    logger.warning(
                        "a live delivery outside the outage failed",
                        metadata: ["notificationUUID": "\(uuid)", "result": "\(result.rawValue)", "attempt": "\(attempt.number)"])
                }
            } else {
                result = .success
            }
            world.attempts.record(uuid, SendAttemptItem(attemptDate: attempt.time, sendAttemptResult: result))
            statistics.update(world.key) {
                $0.deliveryAttempts += 1
                if result == .success { $0.deliverySuccesses += 1 } else { $0.deliveryFailures += 1 }
            }
            if result == .success { delivered += 1 }
            // The sandbox attempts once.
            if result != .success, world.scenario.environment == .production, attempt.number <= Self.retryDelays.count {
                let next = attempt.time + Self.retryDelays[attempt.number - 1]
                if next <= scenario.now {
                    let retry = Attempt(time: next, world: attempt.world, index: attempt.index, number: attempt.number + 1)
                    // Keep the remaining queue in time order.
                    var low = position, high = queue.count
                    while low < high {
                        let middle = (low + high) / 2
                        if queue[middle].time <= next { low = middle + 1 } else { high = middle }
                    }
                    queue.insert(retry, at: low)
                }
            }
        }
        statistics.liveDeliveryCompleted()
        logger.info(
            "live delivery complete",
            metadata: [
                "attempts": "\(queue.count)", "delivered": "\(delivered)", "webhook": "\(configuration.webhookURL ?? "none")",
            ])
    }

    /// The result of an attempt made while the webhook was down, varied like real outages.
    static func outageFailure(uuid: String, attempt: Int) -> SendAttemptResult {
        let results: [SendAttemptResult] = [.timedOut, .noResponse, .unsuccessfulHTTPResponseCode, .socketIssue, .prematureClose]
        let hash = "\(uuid)/\(attempt)".utf8.reduce(UInt64(14_695_981_039_346_656_037)) { ($0 ^ UInt64($1)) &* 1_099_511_628_211 }
        return results[Int(hash % UInt64(results.count))]
    }

    /// POSTs `{"signedPayload": ...}` as Apple does; 200 to 206 is a success. A webhook that takes
    /// longer than `timeout` (or refuses connections that long: the client retries them until
    /// then) is a failed attempt.
    func post(_ signedPayload: String, to url: String, timeout: Duration = .seconds(10)) async -> SendAttemptResult {
        do {
            var request = HTTPClientRequest(url: url)
            request.method = .POST
            request.headers.add(name: "Content-Type", value: "application/json")
            request.headers.add(name: "User-Agent", value: "App Store Server Notifications (mock)")
            request.body = .bytes(ByteBuffer(data: try JSONEncoder().encode(ResponseBodyV2(signedPayload: signedPayload))))
            let response = try await HTTPClient.shared.execute(
                request, timeout: .nanoseconds(Int64(timeout.components.seconds) * 1_000_000_000))
            _ = try? await response.body.collect(upTo: 1 << 20)
            return (200...206).contains(response.status.code) ? .success : .unsuccessfulHTTPResponseCode
        } catch let error as HTTPClientError where error == .deadlineExceeded || error == .connectTimeout || error == .readTimeout {
            return .timedOut
        } catch let error as HTTPClientError where error == .remoteConnectionClosed {
            return .prematureClose
        } catch {
            return String(describing: error).contains("refused") ? .noResponse : .socketIssue
        }
    }
}
