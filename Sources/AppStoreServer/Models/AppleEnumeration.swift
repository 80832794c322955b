/// A value of one of Apple's enumerations, kept as its raw value so values Apple adds later
/// decode without error and survive storage and logs. Compare against the static members for the
/// values documented when this code was written.
public protocol AppleEnumeration: RawRepresentable, Hashable, Sendable, Codable, CustomStringConvertible
where RawValue: Hashable & Sendable & Codable & CustomStringConvertible {
    init(rawValue: RawValue)

    /// The values Apple documented when this code was written.
    static var knownValues: [Self] { get }
}

extension AppleEnumeration {
    /// Whether Apple documented this value when this code was written.
    public var isKnown: Bool { Self.knownValues.contains(self) }

    public var description: String { rawValue.description }
}
