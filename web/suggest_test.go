package web

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSuggestions(t *testing.T) {
	many := make([]string, 0, 20)
	for i := range 20 {
		many = append(many, "prompt "+strconv.Itoa(i))
	}
	tests := []struct {
		name string
		fn   func() []string
		want []string
	}{
		{"none configured", nil, []string{}},
		{"the deployment's", func() []string { return []string{"plan a trip to Lisbon", "", "divide 10 by 0"} }, []string{"plan a trip to Lisbon", "divide 10 by 0"}},
		{"capped", func() []string { return many }, many[:maxSuggestions]},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			New(Options{Suggestions: tt.fn}).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/suggestions.json", nil))
			require.Equal(t, http.StatusOK, rec.Code)
			assert.Equal(t, "application/json", rec.Header().Get("Content-Type"))
			assert.Equal(t, "no-store", rec.Header().Get("Cache-Control"))
			var body struct{ Suggestions []string }
			require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &body))
			assert.Equal(t, tt.want, body.Suggestions)
		})
	}
}

func TestSuggestionsAreAskedEachTime(t *testing.T) {
	calls := 0
	h := New(Options{Suggestions: func() []string { calls++; return []string{strconv.Itoa(calls)} }})
	for want := 1; want <= 2; want++ {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/suggestions.json", nil))
		assert.JSONEq(t, `{"suggestions":["`+strconv.Itoa(want)+`"]}`, rec.Body.String())
	}
}
