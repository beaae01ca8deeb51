package subagent

import (
	sdk "github.com/a2aproject/a2a-go/v2/a2a"
)

// MaxFileBytes bounds the bytes of inline files a [Result] keeps, over all its files: a
// file whose bytes do not fit in what is left is kept as a reference to its size only
// (File.Bytes nil), so that memory stays bounded whatever an agent sends.
const MaxFileBytes = 1 << 20

// maxFiles bounds how many files a Result lists; the rest are counted in FilesOmitted.
const maxFiles = 32

// File is a file part of a completed task's artifacts, or of a direct reply: given inline
// (Bytes, Size) or by reference (URI).
type File struct {
	// Name and MediaType are the part's filename and media type, as the agent gave them.
	Name, MediaType string
	// ArtifactID is the artifact the file belongs to ("" for a direct reply).
	ArtifactID string
	// URI is the file's address when the agent gave it by reference.
	URI string
	// Bytes are the file's content when the agent gave it inline, nil when it was left out
	// for MaxFileBytes (Size still says how large it was).
	Bytes []byte
	// Size is the length of an inline file's content, kept or not.
	Size int64
}

// Inline reports whether the file was given inline (its Bytes kept or left out).
func (f File) Inline() bool { return f.URI == "" }

// fileOf returns the file a part carries, if it carries one.
func fileOf(p *sdk.Part, artifact sdk.ArtifactID) (File, bool) {
	if p == nil {
		return File{}, false
	}
	switch c := p.Content.(type) {
	case sdk.Raw:
		return File{Name: p.Filename, MediaType: p.MediaType, ArtifactID: string(artifact), Bytes: c, Size: int64(len(c))}, true
	case sdk.URL:
		if c == "" {
			return File{}, false
		}
		return File{Name: p.Filename, MediaType: p.MediaType, ArtifactID: string(artifact), URI: string(c)}, true
	}
	return File{}, false
}

// noteFiles records the file parts of parts added to the view, at most maxFiles; an inline
// file is recorded without its bytes once the delegation's views hold MaxFileBytes (a view
// replaced later does not give its share back: the bound is on what was ever held).
func (v *artifactView) noteFiles(parts []*sdk.Part) {
	for _, p := range parts {
		f, ok := fileOf(p, v.id)
		if !ok {
			continue
		}
		if len(v.files) >= maxFiles {
			v.filesOmitted++
			continue
		}
		switch {
		case f.Bytes == nil:
		case v.kept == nil || *v.kept+f.Size > MaxFileBytes:
			f.Bytes = nil
		default:
			*v.kept += f.Size
		}
		v.files = append(v.files, f)
	}
}

// files returns the delegation's files, in order of appearance, with at most
// MaxFileBytes of inline content over all of them, and how many were left out.
func (d *delegation) files() (files []File, omitted int) {
	room := int64(MaxFileBytes)
	keep := func(f File) {
		if len(files) >= maxFiles {
			omitted++
			return
		}
		if f.Bytes != nil {
			if f.Size > room {
				f.Bytes = nil
			} else {
				room -= f.Size
			}
		}
		files = append(files, f)
	}
	if d.reply != nil {
		for _, p := range d.reply.Parts {
			if f, ok := fileOf(p, ""); ok {
				keep(f)
			}
		}
		return files, omitted
	}
	for _, v := range d.artifacts {
		omitted += v.filesOmitted
		for _, f := range v.files {
			keep(f)
		}
	}
	return files, omitted
}
