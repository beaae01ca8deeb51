package bridge

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// DefaultMaxUntrusted caps outside text placed after a tag.
const DefaultMaxUntrusted = 16 << 10

// Untrusted makes outside text safe to place after a tag, capped at DefaultMaxUntrusted
// bytes. See [UntrustedN].
func Untrusted(s string) string { return UntrustedN(s, DefaultMaxUntrusted) }

// UntrustedN makes outside text (sub-agent messages, artifacts, MCP content) safe to place
// after a tag:
//
//   - it is capped at max bytes of the input (max <= 0: no cap), cut on a character
//     boundary and followed by a line "… (truncated N bytes)";
//   - every line break the model might see becomes "\n": "\r\n", lone "\r", vertical tab,
//     form feed, NEL, U+2028 and U+2029 (so no line can hide behind them);
//   - other control characters (C0 except "\t" and "\n", DEL, C1) and invalid UTF-8
//     become U+FFFD;
//   - every line that could be read as a tag gets a leading backslash. The check looks at
//     the line's skeleton (NFKD, invisible and combining characters removed, look-alike
//     letters, brackets and colons folded to ASCII; see skeleton), so "[C\u200bOMPLETED]",
//     "［ＣＯＭＰＬＥＴＥＤ］", Cyrillic look-alikes and "【COMPLETED】" are caught. A line is
//     tag-like when, after whitespace, "[" is followed by a word of letters, digits and "_"
//     that is upper case or followed by ":" or "]" (any case), or when, with all spacing
//     and underscores removed, it starts with "[" and a tag name of the closed set
//     ("[C O M P L E T E D]"). A line that already starts with a backslash (after the
//     same prefix) gets one too, so escaping stays unambiguous: one leading backslash is
//     always ours.
func UntrustedN(s string, max int) string {
	truncated := 0
	if max > 0 && len(s) > max {
		cut := max
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		truncated = len(s) - cut
		s = s[:cut]
	}
	s = normalise(s)
	lines := strings.Split(s, "\n")
	for i, line := range lines {
		if needsEscape(line) {
			lines[i] = `\` + line
		}
	}
	out := strings.Join(lines, "\n")
	if truncated > 0 {
		if out != "" && !strings.HasSuffix(out, "\n") {
			out += "\n"
		}
		out += fmt.Sprintf("… (truncated %d bytes)", truncated)
	}
	return out
}

// normalise maps line breaks to "\n" and neutralises other control characters.
func normalise(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size <= 1:
			b.WriteRune(unicode.ReplacementChar)
		case r == '\r':
			b.WriteByte('\n')
			if i+1 < len(s) && s[i+1] == '\n' {
				size++ // "\r\n" is one break
			}
		case r == '\n', r == '\t':
			b.WriteRune(r)
		case r == '\v', r == '\f', r == '\u0085', r == '\u2028', r == '\u2029':
			b.WriteByte('\n')
		case unicode.IsControl(r):
			b.WriteRune(unicode.ReplacementChar)
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// needsEscape reports whether a line could be read as a tag, or starts with a backslash,
// once its disguises are removed.
func needsEscape(line string) bool {
	sk := skeleton(line)
	return tagLike(sk) || spacedTag(sk)
}

// compactTagNames are the closed set of tag names without underscores, for spacedTag.
var compactTagNames = func() []string {
	names := []string{TagCompleted, TagFailed, TagRejected, TagCanceled, "CANCELLED", TagInputRequired,
		TagAuthRequired, TagTimeout, TagUnreachable, TagOK, TagError, TagRetry, TagAnswered, TagDeclined}
	for i, n := range names {
		names[i] = strings.ReplaceAll(n, "_", "")
	}
	return names
}()

// spacedTag reports whether a skeleton, with every space, separator and underscore removed
// and in upper case, starts with "[" and a tag name followed by "]", ":", "=" or the end:
// "[ C O M P L E T E D ]" and "[Input Required: x]" read as tags too.
func spacedTag(sk string) bool {
	skip := func(r rune) bool {
		return unicode.IsSpace(r) || unicode.In(r, unicode.Z) || r == '_' || r == '-' || r == '.' || r == '·'
	}
	if i := strings.IndexFunc(sk, func(r rune) bool { return !skip(r) }); i < 0 || sk[i] != '[' {
		return false // most lines: no bracket first, nothing more to look at
	}
	var b strings.Builder
	for _, r := range sk {
		if skip(r) {
			continue
		}
		b.WriteRune(unicode.ToUpper(r))
		if b.Len() > 32 {
			break
		}
	}
	c, ok := strings.CutPrefix(b.String(), "[")
	if !ok {
		return false
	}
	c = strings.TrimLeft(c, "[") // "[[COMPLETED]]" reads as a tag too
	for _, n := range compactTagNames {
		if rest, ok := strings.CutPrefix(c, n); ok && (rest == "" || rest[0] == ']' || rest[0] == ':' || rest[0] == '=') {
			return true
		}
	}
	return false
}

// tagLike reports whether a skeleton starts (after whitespace) with a backslash, or with
// "[" and a word that reads as a tag.
func tagLike(line string) bool {
	rest := strings.TrimLeftFunc(line, func(r rune) bool {
		return unicode.IsSpace(r) || unicode.Is(unicode.Cf, r)
	})
	switch {
	case strings.HasPrefix(rest, `\`):
		return true
	case strings.HasPrefix(rest, "["):
		rest = rest[1:]
	case strings.HasPrefix(rest, "［"): // full-width left square bracket
		rest = rest[len("［"):]
	default:
		return false
	}
	rest = strings.TrimLeft(rest, " \t")
	word := 0
	upper := true
	for word < len(rest) && (isASCIILetter(rest[word]) || rest[word] == '_' || word > 0 && isDigit(rest[word])) {
		upper = upper && !('a' <= rest[word] && rest[word] <= 'z')
		word++
	}
	if word == 0 {
		return false
	}
	if upper && word >= 2 {
		return true // "[COMPLETED - really]", "[INPUT_REQUIRED task_id=x]": tag-like enough
	}
	rest = strings.TrimLeft(rest[word:], " \t")
	return strings.HasPrefix(rest, ":") || strings.HasPrefix(rest, "]") || strings.HasPrefix(rest, "］")
}

func isASCIILetter(c byte) bool { return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }

func isDigit(c byte) bool { return '0' <= c && c <= '9' }
