/// A JSON Schema (the dialect OpenAPI 3.1 uses), as much of it as the API's documents need.
indirect enum JSONSchema: Sendable {
    case string(oneOf: [String]? = nil)
    case integer(minimum: Int? = nil, maximum: Int? = nil)
    case number(minimum: Double? = nil, maximum: Double? = nil)
    case boolean
    case array(of: JSONSchema, minItems: Int? = nil)
    /// An object with these properties; the `required` ones always present. Others are not allowed.
    case object([(name: String, schema: JSONSchema, required: Bool)])
    /// A reference to a named schema in the document's components.
    case reference(String)
    case anyOf([JSONSchema])

    /// The schema as a JSON value (for `JSONSerialization`).
    var json: [String: Any] {
        switch self {
        case .string(let values):
            var schema: [String: Any] = ["type": "string"]
            if let values { schema["enum"] = values }
            return schema
        case .integer(let minimum, let maximum):
            var schema: [String: Any] = ["type": "integer"]
            if let minimum { schema["minimum"] = minimum }
            if let maximum { schema["maximum"] = maximum }
            return schema
        case .number(let minimum, let maximum):
            var schema: [String: Any] = ["type": "number"]
            if let minimum { schema["minimum"] = minimum }
            if let maximum { schema["maximum"] = maximum }
            return schema
        case .boolean:
            return ["type": "boolean"]
        case .array(let element, let minItems):
            var schema: [String: Any] = ["type": "array", "items": element.json]
            if let minItems { schema["minItems"] = minItems }
            return schema
        case .object(let properties):
            var schema: [String: Any] = ["type": "object", "additionalProperties": false,
                                         "properties": Dictionary(uniqueKeysWithValues: properties.map { ($0.name, $0.schema.json) })]
            let required = properties.filter(\.required).map(\.name)
            if !required.isEmpty { schema["required"] = required }
            return schema
        case .reference(let name):
            return ["$ref": "#/components/schemas/\(name)"]
        case .anyOf(let choices):
            return ["anyOf": choices.map(\.json)]
        }
    }
}
