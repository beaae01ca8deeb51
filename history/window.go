package history

import "strings"

// DefaultWindow is the context window assumed for a model that neither llm.context_window
// nor the table below names: small on purpose (the smallest window common among current
// chat models, and room for two tool results of the default max_tool_result_bytes), so
// that an unknown model is compacted early rather than refused; set llm.context_window for
// it.
const DefaultWindow = 32768

// windows are the context windows (input tokens) of well-known models, by name prefix; the
// longest matching prefix wins. Figures from the providers' model pages.
var windows = []struct {
	prefix string
	tokens int
}{
	{"gpt-4.1", 1_047_576},
	{"gpt-4o", 128_000},
	{"gpt-4-turbo", 128_000},
	{"gpt-4", 8_192},
	{"gpt-3.5-turbo", 16_385},
	{"gpt-5", 400_000},
	{"o1", 200_000},
	{"o3", 200_000},
	{"o4-mini", 200_000},
	{"claude-", 200_000},
	{"gemini-1.5-pro", 2_097_152},
	{"gemini-1.5", 1_048_576},
	{"gemini-2", 1_048_576},
	{"mistral-large", 128_000},
	{"llama-3.1", 128_000},
	{"llama-3.2", 128_000},
	{"llama-3.3", 128_000},
}

// Window is the context window of model in tokens: configured when it is above 0
// (llm.context_window), else the built-in table's entry for the model's name (a routing
// prefix such as "openai/" is ignored, case too), else DefaultWindow. known says whether
// the figure came from the configuration or the table.
func Window(model string, configured int) (tokens int, known bool) {
	if configured > 0 {
		return configured, true
	}
	name := strings.ToLower(model)
	if i := strings.LastIndexByte(name, '/'); i >= 0 {
		name = name[i+1:]
	}
	best := -1
	for i, w := range windows {
		if strings.HasPrefix(name, w.prefix) && (best < 0 || len(w.prefix) > len(windows[best].prefix)) {
			best = i
		}
	}
	if best < 0 {
		return DefaultWindow, false
	}
	return windows[best].tokens, true
}
