package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSystemPrompt: llm.system_prompt is taken as written, llm.system_prompt_file is read at
// load (from the file or BATON_LLM_SYSTEM_PROMPT_FILE), and a bad one is refused naming the
// key: both set, a missing file, too long, not text.
func TestSystemPrompt(t *testing.T) {
	const llm = "llm:\n  provider: scripted\n"
	c, err := loadYAML(t, llm+"  system_prompt: |\n    Answer in Portuguese.\n    Be brief.\n", env{})
	require.NoError(t, err)
	assert.Equal(t, "Answer in Portuguese.\nBe brief.\n", c.LLM.SystemPrompt)

	c, err = loadYAML(t, llm, env{"BATON_LLM_SYSTEM_PROMPT": "From the environment."})
	require.NoError(t, err)
	assert.Equal(t, "From the environment.", c.LLM.SystemPrompt)

	t.Run("file", func(t *testing.T) {
		dir := t.TempDir()
		t.Chdir(dir)
		require.NoError(t, os.WriteFile(filepath.Join(dir, "prompt.md"), []byte("Sign every answer.\n"), 0o600))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "baton.yaml"), []byte(llm+"  system_prompt_file: prompt.md\n"), 0o600))
		c, err := load("baton.yaml", env{}.get)
		require.NoError(t, err)
		assert.Equal(t, "Sign every answer.\n", c.LLM.SystemPrompt)
		assert.Equal(t, "prompt.md", c.LLM.SystemPromptFile)

		// From the environment, on the defaults (the demo stack's path).
		d := Default()
		require.NoError(t, d.ApplyEnv(env{"BATON_LLM_SYSTEM_PROMPT_FILE": "prompt.md"}.get))
		require.NoError(t, d.ResolveSystemPrompt())
		assert.Equal(t, "Sign every answer.\n", d.LLM.SystemPrompt)
	})

	bad := []struct {
		name, yaml, file string
		want             string
	}{
		{"both", "  system_prompt: x\n  system_prompt_file: p.md\n", "y", "baton.yaml: llm.system_prompt_file: set llm.system_prompt or llm.system_prompt_file, not both"},
		{"missing file", "  system_prompt_file: nope.md\n", "", "baton.yaml: llm.system_prompt_file: cannot be read"},
		{"file too long", "  system_prompt_file: p.md\n", strings.Repeat("x", MaxSystemPromptBytes+1), "longer than 65536 bytes"},
		{"not text", "  system_prompt_file: p.md\n", "\xff\xfe", "is not UTF-8 text"},
		{"text too long", "  system_prompt: " + strings.Repeat("x", MaxSystemPromptBytes+1) + "\n", "", "baton.yaml: llm.system_prompt: longer than"},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			t.Chdir(dir)
			if tt.file != "" {
				require.NoError(t, os.WriteFile(filepath.Join(dir, "p.md"), []byte(tt.file), 0o600))
			}
			require.NoError(t, os.WriteFile(filepath.Join(dir, "baton.yaml"), []byte(llm+tt.yaml), 0o600))
			_, err := load("baton.yaml", env{}.get)
			require.ErrorIs(t, err, ErrInvalid)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}
