// swift-tools-version:6.2
import PackageDescription

// Modules, one per concern:
// - AppStoreServer: Apple's models, the signed-data verifier and the App Store Server API client.
//   Knows nothing of PostgreSQL.
// - ReconcilerConfiguration: the configuration file (every app and environment of a deployment),
//   read with Yams.
// - ReconcilerShared: what the reconciler, the mock and the command lines share that is not Apple's:
//   the `export` shape of a purchase (PurchaseState) and the times operators type (TimeArgument).
// - Reconciler: the notification handler, the PostgreSQL store, the planner, the replayer, the
//   gap filler, the run ledger and the report. Talks to Apple only through AppStoreServer's client.
// - ReconcilerMetrics: the Prometheus metrics of `serve` and `run` (swift-metrics with swift-prometheus
//   as its backend): the catalog of metric families, one registry per process, the textfile.
//   AppStoreServer and Reconciler know nothing of it.
// - WebhookServer: the live `POST /notifications` endpoint (Hummingbird) around the handler.
// - Forwarder: delivers queued notifications to the app's own webhook over HTTP.
// - MockAppStore: a local App Store imitation for tests, demos and rehearsals.

// Every target: imports are internal unless a file says `public import` (so a module's API names
// each dependency it exposes), and a member is visible only where its module is imported.
let swiftSettings: [SwiftSetting] = [
    .enableUpcomingFeature("InternalImportsByDefault"),
    .enableUpcomingFeature("MemberImportVisibility"),
]

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
            swiftSettings: swiftSettings
        ),
        .target(name: "ReconcilerShared", swiftSettings: swiftSettings),
        .target(
            name: "ReconcilerConfiguration",
            dependencies: [
                "AppStoreServer", "ReconcilerShared",
                .product(name: "Yams", package: "Yams"),
            ],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "ReconcilerDomain",
            dependencies: [
                "AppStoreServer", "ReconcilerShared",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Crypto", package: "swift-crypto"),
            ],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "ReconcilerStore",
            dependencies: [
                "AppStoreServer", "ReconcilerShared", "ReconcilerDomain",
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "Reconciler",
            dependencies: [
                "AppStoreServer", "ReconcilerShared", "ReconcilerDomain", "ReconcilerStore",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "Forwarder",
            dependencies: [
                "AppStoreServer", "Reconciler", "ReconcilerDomain", "ReconcilerStore",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOFoundationCompat", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "ReconcilerMetrics",
            dependencies: [
                "Reconciler", "ReconcilerDomain", "ReconcilerStore",
                "AppStoreServer",
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "WebhookServer",
            dependencies: [
                "Reconciler", "ReconcilerDomain", "ReconcilerStore",
                "ReconcilerMetrics",
                "AppStoreServer",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "NIOFoundationCompat", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings
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
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "ReconcilerCommand",
            dependencies: [
                "Reconciler", "ReconcilerDomain", "ReconcilerStore", "ReconcilerShared", "ReconcilerConfiguration", "Forwarder",
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
            ],
            swiftSettings: swiftSettings
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
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "ReconcilerBenchmarks",
            dependencies: [
                "Reconciler", "ReconcilerDomain", "ReconcilerStore",
                "AppStoreServer",
                "MockAppStore",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "AppStoreServerTests",
            dependencies: [
                "AppStoreServer", "MockAppStore",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "X509", package: "swift-certificates"),
            ],
            exclude: ["Fixtures"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "MockAppStoreTests",
            dependencies: [
                "MockAppStore", "AppStoreServer", "ReconcilerShared",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOFoundationCompat", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "ReconcilerTests",
            dependencies: [
                "Reconciler", "ReconcilerDomain", "ReconcilerStore", "ReconcilerShared", "ReconcilerConfiguration", "Forwarder", "ReconcilerMetrics",
                "WebhookServer",
                "AppStoreServer", "MockAppStore",
                "ReconcilerCommand", "MockAppStoreCommand",
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOFoundationCompat", package: "swift-nio"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "SwiftASN1", package: "swift-asn1"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdTesting", package: "hummingbird"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
            ],
            swiftSettings: swiftSettings
        ),
    ]
)
