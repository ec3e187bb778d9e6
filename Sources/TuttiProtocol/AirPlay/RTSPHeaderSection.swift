/// The part of an RTSP message before its body, as requests and responses share it: a start
/// line, headers, and the body's length from `Content-Length`. Lines end in CRLF; a bare CR or
/// LF, a control byte, a header without a colon or with spaces in its name, two
/// `Content-Length`s, or more than `maximumHeaderCount` headers are refused rather than guessed
/// at (the stream's framing is lost after any of them).
struct RTSPHeaderSection {
    struct Failure: Error {
        var message: String
        /// The body announced is over the limit (413 to a request).
        var isBodyTooLarge = false
    }

    /// The most headers one message may carry.
    static let maximumHeaderCount = 64

    var startLine: String
    var headers: [(name: String, value: String)]
    var bodyLength: Int

    /// The index of the blank line (`\r\n\r\n`) that ends the header section.
    static func end(in bytes: [UInt8]) -> Int? {
        guard bytes.count >= 4 else { return nil }
        var index = 0
        while index + 3 < bytes.count {
            if bytes[index] == 13, bytes[index + 1] == 10, bytes[index + 2] == 13, bytes[index + 3] == 10 { return index }
            index += 1
        }
        return nil
    }

    /// Reads the section `bytes` (without the blank line that ends it).
    init(_ bytes: ArraySlice<UInt8>, maximumBodyBytes: Int) throws(Failure) {
        func bad(_ message: String) -> Failure { Failure(message: message) }
        var lines: [ArraySlice<UInt8>] = []
        var start = bytes.startIndex
        var index = bytes.startIndex
        while index < bytes.endIndex {
            if bytes[index] == 13 {
                guard index + 1 < bytes.endIndex, bytes[index + 1] == 10 else { throw bad("a bare CR in the headers") }
                lines.append(bytes[start..<index])
                index += 2
                start = index
                continue
            }
            guard bytes[index] != 10 else { throw bad("a bare LF in the headers") }
            guard bytes[index] >= 32 || bytes[index] == 9, bytes[index] != 127 else { throw bad("a control byte (\(bytes[index])) in the headers") }
            index += 1
        }
        lines.append(bytes[start..<bytes.endIndex])
        guard let first = lines.first, let startLine = String(validating: first, as: UTF8.self) else {
            throw bad("the first line is not UTF-8")
        }
        var headers: [(name: String, value: String)] = []
        var length = 0
        var sawLength = false
        for line in lines.dropFirst() {
            guard headers.count < Self.maximumHeaderCount else { throw bad("more than \(Self.maximumHeaderCount) headers") }
            guard let colon = line.firstIndex(of: 58) else { throw bad("a header line without a colon") }
            guard let name = String(validating: line[line.startIndex..<colon], as: UTF8.self),
                  let rawValue = String(validating: line[(colon + 1)...], as: UTF8.self) else { throw bad("a header that is not UTF-8") }
            guard !name.isEmpty, name.allSatisfy({ $0.isASCII && !$0.isWhitespace }) else { throw bad("a header name \"\(name.prefix(32))\" with spaces") }
            let value = rawValue.trimmingSpaces
            if name.lowercased() == "content-length" {
                guard !sawLength else { throw bad("two Content-Length headers") }
                guard let count = Int(value), count >= 0, value.allSatisfy(\.isNumber) else { throw bad("Content-Length \"\(value.prefix(32))\" is not a number") }
                guard count <= maximumBodyBytes else {
                    throw Failure(message: "a body of \(count) bytes, over \(maximumBodyBytes)", isBodyTooLarge: true)
                }
                length = count
                sawLength = true
            }
            headers.append((name, value))
        }
        self.startLine = startLine
        self.headers = headers
        self.bodyLength = length
    }
}
