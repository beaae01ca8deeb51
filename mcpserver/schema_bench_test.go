package mcpserver

import (
	"encoding/json"
	"testing"
)

// BenchmarkInputSchemaMarshal: what go-sdk's per-request marshal of a tool's input schema
// costs with the schema as a map and as encoded JSON (inputSchemaJSON).
//
//	go test -run '^$' -bench BenchmarkInputSchemaMarshal -benchmem ./mcpserver/
func BenchmarkInputSchemaMarshal(b *testing.B) {
	for _, tc := range []struct {
		name   string
		schema any
	}{{"map", inputSchema()}, {"raw", inputSchemaJSON}} {
		b.Run(tc.name, func(b *testing.B) {
			for b.Loop() {
				if _, err := json.Marshal(tc.schema); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func TestInputSchemaJSONIsTheSchema(t *testing.T) {
	t.Parallel()
	var got any
	if err := json.Unmarshal(inputSchemaJSON, &got); err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(inputSchema())
	if b2, _ := json.Marshal(got); string(b2) != string(b) {
		t.Fatalf("inputSchemaJSON = %s, want %s", b2, b)
	}
}
