// Package editdist measures how far apart two names are, for "did you mean" suggestions:
// the closest tool names in a retry signal and the closest known variable for a misspelled
// BATON_* environment variable.
//
//	d := editdist.Levenshtein("demo__dvide", "demo__divide") // 1
package editdist

// Levenshtein is the Levenshtein distance of a and b, by bytes. The names it compares are
// ASCII (sanitised tool names, environment variables), where bytes and characters agree.
func Levenshtein(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
