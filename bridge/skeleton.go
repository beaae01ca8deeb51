package bridge

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// skeleton returns the form of a line that tag detection looks at: what a reader (or a
// model) would take the line to say once its disguises are gone. It applies NFKD
// (compatibility decomposition: full-width and other compatibility forms become their
// plain letters, accented letters split into letter and mark), removes default-ignorable
// code points (zero-width characters, joiners, Hangul fillers, variation selectors, bidi
// controls, tag characters) and combining marks, and folds confusable characters (Cyrillic
// and Greek look-alikes, small capitals, regional indicators, negative circled and squared
// letters, and bracket and colon look-alikes such as 【 】) to their ASCII counterparts. The skeleton is only inspected,
// never shown: the text itself is passed on unchanged apart from the escape.
func skeleton(line string) string {
	ascii := true
	for i := 0; i < len(line); i++ {
		if line[i] >= utf8.RuneSelf {
			ascii = false
			break
		}
	}
	if ascii {
		return line
	}
	d := norm.NFKD.String(line)
	var b strings.Builder
	b.Grow(len(d))
	for _, r := range d {
		if invisible(r) || unicode.In(r, unicode.Mn, unicode.Me, unicode.Mc) {
			continue
		}
		if f, ok := confusables[r]; ok {
			r = f
		} else if r >= 0x1F1E6 && r <= 0x1F1FF { // regional indicator symbols A-Z
			r = 'A' + (r - 0x1F1E6)
		} else if r >= 0x1F150 && r <= 0x1F169 { // negative circled letters A-Z
			r = 'A' + (r - 0x1F150)
		} else if r >= 0x1F170 && r <= 0x1F189 { // negative squared letters A-Z
			r = 'A' + (r - 0x1F170)
		}
		b.WriteRune(r)
	}
	return b.String()
}

// invisible reports whether r is a format character or a Default_Ignorable_Code_Point:
// characters that render as nothing, so they can split a tag without being seen.
func invisible(r rune) bool {
	if unicode.Is(unicode.Cf, r) {
		return true
	}
	switch {
	case r == 0x00AD, r == 0x034F, r == 0x061C,
		r == 0x115F, r == 0x1160, // Hangul choseong and jungseong fillers
		r == 0x17B4, r == 0x17B5,
		r >= 0x180B && r <= 0x180F,
		r >= 0x200B && r <= 0x200F,
		r >= 0x202A && r <= 0x202E,
		r >= 0x2060 && r <= 0x206F,
		r == 0x2800, // Braille blank: renders as a space but is not one
		r == 0x3164, // Hangul filler
		r >= 0xFE00 && r <= 0xFE0F,
		r == 0xFEFF,
		r == 0xFFA0, // half-width Hangul filler
		r >= 0xFFF0 && r <= 0xFFF8,
		r >= 0x1BCA0 && r <= 0x1BCA3,
		r >= 0x1D173 && r <= 0x1D17A,
		r >= 0xE0000 && r <= 0xE0FFF:
		return true
	}
	return false
}

// confusables folds characters that look like the ASCII ones a tag is made of. It covers
// what NFKD leaves alone: other scripts' look-alike letters, small capitals, and bracket
// and colon look-alikes.
var confusables = map[rune]rune{
	// Brackets.
	'【': '[', '】': ']', '〔': '[', '〕': ']', '〖': '[', '〗': ']', '〘': '[', '〙': ']',
	'〚': '[', '〛': ']', '⟦': '[', '⟧': ']', '⟬': '[', '⟭': ']', '❲': '[', '❳': ']',
	'⁅': '[', '⁆': ']', '⎡': '[', '⎤': ']', '⎣': '[', '⎦': ']', '⌈': '[', '⌉': ']',
	'⌊': '[', '⌋': ']', '「': '[', '」': ']', '『': '[', '』': ']', '〈': '[', '〉': ']',
	'《': '[', '》': ']', '⟮': '[', '⟯': ']', '⦋': '[', '⦌': ']', '⦍': '[', '⦎': ']',
	'⦏': '[', '⦐': ']', '⦗': '[', '⦘': ']', '⸢': '[', '⸣': ']', '⸤': '[', '⸥': ']',
	// Colons.
	'∶': ':', '꞉': ':', 'ː': ':', '˸': ':', '։': ':', '׃': ':', '܃': ':', '܄': ':',
	'᠄': ':', '⁚': ':', '⦂': ':', '︓': ':', 'ꓽ': ':',
	// Underscore look-alikes.
	'‗': '_', '＿': '_', 'ˍ': '_',
	// Cyrillic.
	'А': 'A', 'В': 'B', 'С': 'C', 'Е': 'E', 'Н': 'H', 'І': 'I', 'Ј': 'J', 'К': 'K',
	'М': 'M', 'О': 'O', 'Р': 'P', 'Ѕ': 'S', 'Т': 'T', 'Х': 'X', 'У': 'Y', 'Ү': 'Y',
	'Ԁ': 'D', 'Ԍ': 'G', 'Ԛ': 'Q', 'Ԝ': 'W', 'Ӏ': 'I', 'Һ': 'H', 'Ԯ': 'L', 'Љ': 'L',
	'а': 'a', 'в': 'b', 'с': 'c', 'е': 'e', 'һ': 'h', 'і': 'i', 'ј': 'j', 'к': 'k',
	'м': 'm', 'н': 'h', 'о': 'o', 'р': 'p', 'ѕ': 's', 'т': 't', 'х': 'x', 'у': 'y',
	'ү': 'y', 'ԁ': 'd', 'ԛ': 'q', 'ԝ': 'w', 'ӏ': 'l', 'ɡ': 'g', 'ь': 'b', 'п': 'n',
	'г': 'r', 'и': 'u', 'ԍ': 'g', 'ѵ': 'v', 'Ѵ': 'V', 'ђ': 'h', 'ћ': 'h',
	// Greek.
	'Α': 'A', 'Β': 'B', 'Ε': 'E', 'Ζ': 'Z', 'Η': 'H', 'Ι': 'I', 'Κ': 'K', 'Μ': 'M',
	'Ν': 'N', 'Ο': 'O', 'Ρ': 'P', 'Τ': 'T', 'Υ': 'Y', 'Χ': 'X', 'Ϲ': 'C', 'Ϳ': 'J',
	'α': 'a', 'β': 'b', 'ε': 'e', 'ι': 'i', 'κ': 'k', 'ν': 'v', 'ο': 'o', 'ρ': 'p',
	'τ': 't', 'υ': 'u', 'χ': 'x', 'γ': 'y', 'ϲ': 'c', 'ϳ': 'j', 'η': 'n', 'ω': 'w',
	'δ': 'd', 'μ': 'u', 'σ': 'o',
	// Armenian, Cherokee and other look-alikes.
	'Օ': 'O', 'օ': 'o', 'ս': 'u', 'ց': 'g', 'հ': 'h', 'ո': 'n', 'զ': 'q',
	'Ꭺ': 'A', 'Ᏼ': 'B', 'Ꮯ': 'C', 'Ꭼ': 'E', 'Ꮐ': 'G', 'Ꮋ': 'H', 'Ꭻ': 'J', 'Ꮶ': 'K',
	'Ꮮ': 'L', 'Ꮇ': 'M', 'Ꮲ': 'P', 'Ꮪ': 'S', 'Ꭲ': 'T', 'Ꮩ': 'V', 'Ꮃ': 'W', 'Ꮓ': 'Z',
	'ı': 'i', 'ȷ': 'j', 'ℓ': 'l', 'Ɩ': 'l',
	// Latin small capitals and letter-like symbols.
	'ᴀ': 'A', 'ʙ': 'B', 'ᴄ': 'C', 'ᴅ': 'D', 'ᴇ': 'E', 'ꜰ': 'F', 'ɢ': 'G', 'ʜ': 'H',
	'ɪ': 'I', 'ᴊ': 'J', 'ᴋ': 'K', 'ʟ': 'L', 'ᴍ': 'M', 'ɴ': 'N', 'ᴏ': 'O', 'ᴘ': 'P',
	'ʀ': 'R', 'ꜱ': 'S', 'ᴛ': 'T', 'ᴜ': 'U', 'ᴠ': 'V', 'ᴡ': 'W', 'ʏ': 'Y', 'ᴢ': 'Z',
	'ǫ': 'Q', 'ꞯ': 'Q', 'ғ': 'F',
}
