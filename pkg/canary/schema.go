package canary

import _ "embed"

// JSONSchema is the JSON Schema (draft 2020-12) of a Report as
// encoding/json writes it: the objects of kvq canary watch --output json
// and of serve-verdict's GET /verdict.
//
//go:embed schema.json
var JSONSchema []byte
