// swift-tools-version:6.2
import PackageDescription

// Modules, one per concern:
// - AppStoreServer: Apple's models, the signed-data verifier and the App Store Server API client.
//   Knows nothing of PostgreSQL.
// - ReconcilerConfiguration: the configuration file (every app and environment of a deployment),
//   read with Yams.
// - ReconcilerShared: what the reconciler, the mock and the command lines share that is not Apple's:
//   the `export` shape of a purchase (PurchaseState) and the times operators type (TimeArgument).
// - ReconcilerDomain: the pure types the store and the core share (a run's vocabulary, the planner and its shards,
//   verified notifications and their results, the budget's allocation, the timeline, ReconcilerError).
// - ReconcilerStore: PostgreSQL (Database, transactions, PurchaseStore, ForwardQueue, the run ledger,
//   migrations); the only module that imports PostgresNIO.
// - Reconciler: the notification handler, the replayer, the gap filler, repair, the schedule, the
//   change-feed follower and the report. Knows no SQL; talks to Apple only through AppStoreServer's client.
// - ReconcilerMetrics: the Prometheus metrics of `serve` and `run` (swift-metrics with swift-prometheus
//   as its backend): the catalog of metric families, one registry per process, the textfile.
//   AppStoreServer and Reconciler know nothing of it.
// - ReportPage: the incident report page (one self-contained HTML file) of a run's report.
// - WebhookServer: the live `POST /notifications` endpoint (Hummingbird) around the handler.
// - Forwarder: delivers queued notifications to the app's own webhook over HTTP.
// - MockAppStore: a local App Store imitation for tests, demos and rehearsals.

// Every target: imports are internal unless a file says `package import` (so a module's API names
// each dependency it exposes), and a member is visible only where its module is imported.
let swiftSettings: [SwiftSetting] = [
    .enableUpcomingFeature("InternalImportsByDefault"),
    .enableUpcomingFeature("MemberImportVisibility"),
]
// Every target: the build fails on an import the target's entry below does not declare, and on
// PostgresNIO outside the store (Plugins/ImportSeams), since SwiftPM would let a target import
// any module built before it.
let seams: [Target.PluginUsage] = [.plugin(name: "ImportSeams")]

let package = Package(
    name: "AppStoreReconciler",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "reconciler", targets: ["ReconcilerCommand"]),
        .executable(name: "mock-appstore", targets: ["MockAppStoreCommand"]),
        .executable(name: "reconciler-bench", targets: ["ReconcilerBenchmarks"]),
        .library(name: "AppStoreServer", targets: ["AppStoreServer"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-crypto", from: "4.5.2"),
        .package(url: "https://github.com/apple/swift-certificates", from: "1.21.1"),
        .package(url: "https://github.com/apple/swift-asn1", from: "1.7.4"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.2"),
        .package(url: "https://github.com/swift-server/async-http-client", from: "1.37.0"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.13.0"),
        .package(url: "https://github.com/vapor/postgres-nio", from: "1.33.2"),
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.28.1"),
        .package(url: "https://github.com/apple/swift-metrics", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus", from: "2.4.1"),
        .package(url: "https://github.com/jpsim/Yams", from: "6.2.2"),
    ],
    targets: [
        .plugin(name: "ImportSeams", capability: .buildTool()),
        // migrations/*.sql embedded into the store as `Migration.embedded` while it builds, so the
        // binary carries its schema and no generated copy is committed (Plugins/EmbedMigrations).
        .plugin(name: "EmbedMigrations", capability: .buildTool(), dependencies: ["MigrationEmbedder"]),
        .executableTarget(name: "MigrationEmbedder", swiftSettings: swiftSettings, plugins: seams),
        .target(
            name: "AppStoreServer",
            dependencies: [
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "SwiftASN1", package: "swift-asn1"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOFoundationCompat", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings,
            plugins: seams
        ),
        .target(name: "ReconcilerShared", dependencies: ["AppStoreServer"], swiftSettings: swiftSettings, plugins: seams),
        // The system zlib: stored JSON payloads are kept deflated (ReconcilerDomain's Deflate).
        .systemLibrary(name: "CZlib", pkgConfig: "zlib", providers: [.apt(["zlib1g-dev"])]),
        .target(
            name: "ReconcilerConfiguration",
            dependencies: [
                "AppStoreServer", "ReconcilerShared", "ReconcilerDomain",
                .product(name: "Yams", package: "Yams"),
            ],
            swiftSettings: swiftSettings,
            plugins: seams
        ),
        .target(
            name: "ReconcilerDomain",
            dependencies: [
                "AppStoreServer", "ReconcilerShared", "CZlib",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Crypto", package: "swift-crypto"),
            ],
            swiftSettings: swiftSettings,
            plugins: seams
        ),
        .target(
            name: "ReconcilerStore",
            dependencies: [
                "AppStoreServer", "ReconcilerShared", "ReconcilerDomain",
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "NIOCore", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings,
            plugins: seams + [.plugin(name: "EmbedMigrations")]
        ),
        .target(
            name: "Reconciler",
            dependencies: [
                "AppStoreServer", "ReconcilerShared", "ReconcilerDomain", "ReconcilerStore",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: swiftSettings,
            plugins: seams
        ),
        .target(
            name: "ReportPage",
            dependencies: ["Reconciler", "ReconcilerDomain", "ReconcilerShared", "AppStoreServer"],
            swiftSettings: swiftSettings,
            plugins: seams
        ),
        .target(
            name: "Forwarder",
            dependencies: [
                "AppStoreServer", "Reconciler", "ReconcilerDomain", "ReconcilerStore", "ReconcilerShared",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOFoundationCompat", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                // The connection's errors, to say why a delivery got no answer (DeliveryFailure).
                .product(name: "NIOPosix", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings,
            plugins: seams
        ),
        .target(
            name: "ReconcilerMetrics",
            dependencies: [
                "Reconciler", "ReconcilerDomain", "ReconcilerStore", "ReconcilerShared",
                "AppStoreServer",
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: swiftSettings,
            plugins: seams
        ),
        .target(
            name: "WebhookServer",
            dependencies: [
                "Reconciler", "ReconcilerDomain", "ReconcilerStore",
                "ReconcilerMetrics", "ReconcilerShared",
                "AppStoreServer",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "NIOFoundationCompat", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings,
            plugins: seams
        ),
        .target(
            name: "MockAppStore",
            dependencies: [
                "AppStoreServer", "ReconcilerShared",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "SwiftASN1", package: "swift-asn1"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOFoundationCompat", package: "swift-nio"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: swiftSettings,
            plugins: seams
        ),
        .executableTarget(
            name: "ReconcilerCommand",
            dependencies: [
                "Reconciler", "ReconcilerDomain", "ReconcilerStore", "ReportPage", "ReconcilerShared", "ReconcilerConfiguration", "Forwarder",
                "ReconcilerMetrics",
                "WebhookServer",
                "AppStoreServer",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings,
            plugins: seams
        ),
        .executableTarget(
            name: "MockAppStoreCommand",
            dependencies: [
                "MockAppStore", "ReconcilerShared",
                "AppStoreServer",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
            ],
            swiftSettings: swiftSettings,
            plugins: seams
        ),
        .executableTarget(
            name: "ReconcilerBenchmarks",
            dependencies: [
                "Reconciler", "ReconcilerDomain", "ReconcilerShared", "ReconcilerStore",
                "AppStoreServer",
                "MockAppStore",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings,
            plugins: seams
        ),
        // Tests as a pyramid. TestSupport: what the test targets share (the test app, the database,
        // rehearsals, processes, HTTP, temporary directories). UnitTests: no database, no child
        // process (in-process servers only); runs without DATABASE_URL (`swift test --filter UnitTests`).
        // IntegrationTests: a real PostgreSQL (TestDatabase), no child process. EndToEndTests: real
        // processes (`reconciler`, `mock-appstore`, a private PostgreSQL cluster), Chromium, promtool.
        .target(
            name: "TestSupport",
            dependencies: [
                "AppStoreServer", "MockAppStore", "Reconciler", "ReconcilerDomain", "ReconcilerShared", "ReconcilerStore", "ReconcilerMetrics",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOFoundationCompat", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "SwiftASN1", package: "swift-asn1"),
                .product(name: "X509", package: "swift-certificates"),
            ],
            path: "Tests/TestSupport",
            swiftSettings: swiftSettings,
            plugins: seams
        ),
        .testTarget(
            name: "UnitTests",
            dependencies: [
                "TestSupport",
                "Forwarder",
                "AppStoreServer", "MockAppStore", "Reconciler", "ReconcilerDomain", "ReconcilerStore", "ReconcilerConfiguration", "ReconcilerMetrics",
                "ReconcilerShared",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOFoundationCompat", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "X509", package: "swift-certificates"),
            ],
            exclude: ["AppStoreServer/Fixtures"],
            swiftSettings: swiftSettings,
            plugins: seams
        ),
        .testTarget(
            name: "IntegrationTests",
            dependencies: [
                "TestSupport",
                "AppStoreServer", "Forwarder", "MockAppStore", "Reconciler", "ReconcilerDomain", "ReconcilerStore", "ReconcilerMetrics",
                "ReconcilerShared", "WebhookServer",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdTesting", package: "hummingbird"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOFoundationCompat", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                // Graceful shutdown of the services in process, triggered as a signal would.
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "ServiceLifecycleTestKit", package: "swift-service-lifecycle"),
            ],
            swiftSettings: swiftSettings,
            plugins: seams
        ),
        .testTarget(
            name: "EndToEndTests",
            dependencies: [
                "TestSupport",
                "AppStoreServer", "MockAppStore", "Reconciler", "ReconcilerDomain", "ReconcilerStore", "ReportPage", "ReconcilerMetrics",
                "ReconcilerShared", "Forwarder",
                // Not imported: the executables the tests run, built with the tests.
                "ReconcilerCommand", "MockAppStoreCommand",
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
            ],
            swiftSettings: swiftSettings,
            plugins: seams
        ),
    ]
)

// The unit stage (`jobs/dev/test --stage unit`) builds under Thread Sanitizer in a scratch path of its
// own, and only what the unit tests use: with RECONCILER_TEST_STAGE=unit the package leaves out the
// other test targets, the executables and the modules only they import (the webhook server and
// Hummingbird, the report page, the commands). Without it the package is whole.
if Context.environment["RECONCILER_TEST_STAGE"] == "unit" {
    let notForUnitTests: Set<String> = [
        "IntegrationTests", "EndToEndTests", "ReconcilerCommand", "MockAppStoreCommand", "ReconcilerBenchmarks", "WebhookServer", "ReportPage",
    ]
    package.targets.removeAll { notForUnitTests.contains($0.name) }
    package.products.removeAll { product in product.name != "AppStoreServer" }
}
