package server

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// do sends a request with the given headers ("Host" sets the Host header) and returns the
// status and the decoded JSON error code ("" for a non-JSON body, such as a stream).
func do(t *testing.T, method, u, b string, hdr ...string) (int, string, http.Header) {
	t.Helper()
	req, err := http.NewRequest(method, u, strings.NewReader(b))
	require.NoError(t, err)
	for i := 0; i+1 < len(hdr); i += 2 {
		if hdr[i] == "Host" {
			req.Host = hdr[i+1]
			continue
		}
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var eb struct {
		Error string `json:"error"`
	}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		_ = json.NewDecoder(resp.Body).Decode(&eb)
	} else {
		_, _ = io.Copy(io.Discard, resp.Body)
	}
	return resp.StatusCode, eb.Error, resp.Header
}

func released() blockingModel {
	r := make(chan struct{})
	close(r)
	return blockingModel{release: r}
}

func TestLoopbackListenerRefusesForeignHost(t *testing.T) {
	srv, e := newTestServer(t, released(), Config{ListenAddr: "127.0.0.1:8080"})
	port := srv.URL[strings.LastIndexByte(srv.URL, ':')+1:]
	for _, host := range []string{"evil.example:" + port, "evil.example", "127.0.0.1.nip.io:" + port, "localhost.evil.example", "0.0.0.0:" + port, "10.0.0.1"} {
		st, code, _ := do(t, http.MethodGet, srv.URL+"/healthz", "", "Host", host)
		assert.Equal(t, http.StatusForbidden, st, host)
		assert.Equal(t, "FORBIDDEN_HOST", code, host)
		st, _, _ = do(t, http.MethodPost, srv.URL+"/agui", body("rebind", "r", ""), "Host", host, "Content-Type", "application/json")
		assert.Equal(t, http.StatusForbidden, st, host)
	}
	assert.Equal(t, 0, e.Active())
	for _, host := range []string{"localhost:" + port, "LOCALHOST", "127.0.0.1:" + port, "127.0.0.1", "[::1]:" + port, "[::1]"} {
		st, _, _ := do(t, http.MethodGet, srv.URL+"/healthz", "", "Host", host)
		assert.Equal(t, http.StatusOK, st, host)
	}
	st, _, _ := do(t, http.MethodPost, srv.URL+"/agui", body("rebind", "r", ""), "Host", "localhost:"+port, "Content-Type", "application/json")
	assert.Equal(t, http.StatusOK, st)
}

func TestNonLoopbackListenerAcceptsAnyHost(t *testing.T) {
	srv, _ := newTestServer(t, released(), Config{ListenAddr: "0.0.0.0:8080"})
	st, _, _ := do(t, http.MethodGet, srv.URL+"/healthz", "", "Host", "baton.example.com")
	assert.Equal(t, http.StatusOK, st)
}

func TestIsLoopbackListen(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1:8080": true, "localhost:1": true, "[::1]:80": true, "127.1.2.3:0": true,
		"0.0.0.0:8080": false, ":8080": false, "[::]:80": false, "10.0.0.1:80": false, "example.com:80": false,
	} {
		assert.Equal(t, want, IsLoopbackListen(addr), addr)
	}
}

func TestCSRFGuardWithoutAuth(t *testing.T) {
	srv, e := newTestServer(t, released(), Config{ListenAddr: "127.0.0.1:0", AllowedOrigins: []string{"https://app.example.com"}})
	u, _ := url.Parse(srv.URL)
	refused := []struct {
		name string
		hdr  []string
		code string
	}{
		{"text/plain", []string{"Content-Type", "text/plain"}, "FORBIDDEN"},
		{"form", []string{"Content-Type", "application/x-www-form-urlencoded"}, "FORBIDDEN"},
		{"no content type", nil, "FORBIDDEN"},
		{"foreign origin", []string{"Content-Type", "application/json", "Origin", "http://evil.example"}, "FORBIDDEN_ORIGIN"},
		{"same host other port", []string{"Content-Type", "application/json", "Origin", "http://" + u.Hostname() + ":1"}, "FORBIDDEN_ORIGIN"},
		{"null origin", []string{"Content-Type", "application/json", "Origin", "null"}, "FORBIDDEN_ORIGIN"},
		{"file origin", []string{"Content-Type", "application/json", "Origin", "file://"}, "FORBIDDEN_ORIGIN"},
		{"allowed origin over http", []string{"Content-Type", "application/json", "Origin", "http://app.example.com"}, "FORBIDDEN_ORIGIN"},
	}
	for _, tt := range refused {
		st, code, _ := do(t, http.MethodPost, srv.URL+"/agui", body("csrf", "r", ""), tt.hdr...)
		assert.Equal(t, http.StatusForbidden, st, tt.name)
		assert.Equal(t, tt.code, code, tt.name)
		st, _, _ = do(t, http.MethodPost, srv.URL+"/agui/threads/csrf/runs/r/stop", "", tt.hdr...)
		assert.Equal(t, http.StatusForbidden, st, tt.name)
	}
	assert.Equal(t, 0, e.Active())
	for i, hdr := range [][]string{
		{"Content-Type", "application/json"},
		{"Content-Type", "application/json; charset=utf-8"},
		{"Content-Type", "application/json", "Origin", srv.URL},
		{"Content-Type", "application/json", "Origin", "HTTPS://APP.example.com:443"},
	} {
		st, _, _ := do(t, http.MethodPost, srv.URL+"/agui", body("csrf", fmt.Sprint("ok", i), ""), hdr...)
		assert.Equal(t, http.StatusOK, st, hdr)
	}
}

func TestAuthOnSkipsOriginCheckButNotContentType(t *testing.T) {
	srv, _ := newTestServer(t, released(), Config{AuthTokens: []string{"alpha"}})
	st, _, _ := do(t, http.MethodPost, srv.URL+"/agui", body("a", "r", ""), "Authorization", "Bearer alpha", "Content-Type", "application/json", "Origin", "https://elsewhere.example")
	assert.Equal(t, http.StatusOK, st)
	st, code, _ := do(t, http.MethodPost, srv.URL+"/agui", body("a", "r2", ""), "Authorization", "Bearer alpha", "Content-Type", "text/plain")
	assert.Equal(t, http.StatusUnsupportedMediaType, st)
	assert.Equal(t, "UNSUPPORTED_MEDIA_TYPE", code)
}

func TestBearerSchemeIsCaseInsensitive(t *testing.T) {
	srv, _ := newTestServer(t, released(), Config{AuthTokens: []string{"alpha"}})
	for i, h := range []string{"Bearer alpha", "bearer alpha", "BEARER alpha", "bEaReR   alpha "} {
		st, _, _ := do(t, http.MethodPost, srv.URL+"/agui", body("b", fmt.Sprint("r", i), ""), "Authorization", h, "Content-Type", "application/json")
		assert.Equal(t, http.StatusOK, st, h)
	}
	for _, h := range []string{"Basic alpha", "alpha", "Bearer", "Bearer beta", "Bearer  "} {
		st, _, _ := do(t, http.MethodPost, srv.URL+"/agui", body("b", "rx", ""), "Authorization", h, "Content-Type", "application/json")
		assert.Equal(t, http.StatusUnauthorized, st, h)
	}
}

func TestStopOfAnotherPrincipalsThreadIsNotFound(t *testing.T) {
	srv, e := newTestServer(t, blockingModel{}, Config{AuthTokens: []string{"alpha", "beta"}})
	resp := post(t, srv.URL+"/agui", body("mine", "r1", ""), "Authorization", "Bearer alpha")
	defer resp.Body.Close()
	_, err := bufio.NewReader(resp.Body).ReadString('\n')
	require.NoError(t, err)

	stOther, codeOther, _ := do(t, http.MethodPost, srv.URL+"/agui/threads/mine/runs/r1/stop", "", "Authorization", "Bearer beta", "Content-Type", "application/json")
	stUnknown, codeUnknown, _ := do(t, http.MethodPost, srv.URL+"/agui/threads/nosuch/runs/r1/stop", "", "Authorization", "Bearer beta", "Content-Type", "application/json")
	assert.Equal(t, http.StatusNotFound, stOther)
	assert.Equal(t, stUnknown, stOther)
	assert.Equal(t, codeUnknown, codeOther)
	assert.Equal(t, 1, e.Active(), "the other principal's stop changed nothing")

	st, _, _ := do(t, http.MethodPost, srv.URL+"/agui/threads/mine/runs/r1/stop", "", "Authorization", "Bearer alpha", "Content-Type", "application/json")
	assert.Equal(t, http.StatusAccepted, st)
}

func TestEveryValidIDCanBeStopped(t *testing.T) {
	srv, e := newTestServer(t, blockingModel{}, Config{})
	for _, ids := range [][2]string{{"a.b:c_d-e", "R:1.2"}, {"..", "."}, {strings.Repeat("x", 128), strings.Repeat("y", 128)}} {
		resp := post(t, srv.URL+"/agui", body(ids[0], ids[1], ""))
		_, err := bufio.NewReader(resp.Body).ReadString('\n')
		require.NoError(t, err)
		// Escape ':' too, as some clients do: the server must decode it.
		esc := func(s string) string { return strings.ReplaceAll(url.PathEscape(s), ":", "%3A") }
		u := srv.URL + "/agui/threads/" + esc(ids[0]) + "/runs/" + esc(ids[1]) + "/stop"
		st, _, _ := do(t, http.MethodPost, u, "", "Content-Type", "application/json")
		assert.Equal(t, http.StatusAccepted, st, ids)
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	require.Eventually(t, func() bool { return e.Active() == 0 }, 10*time.Second, 5*time.Millisecond)
	st, _, _ := do(t, http.MethodPost, srv.URL+"/agui/threads/a%2Fb/runs/r/stop", "", "Content-Type", "application/json")
	assert.Equal(t, http.StatusNotFound, st)
}

func TestMaxActiveRuns(t *testing.T) {
	srv, e := newTestServer(t, blockingModel{}, Config{MaxActiveRuns: 2})
	var open []*http.Response
	for i := range 2 {
		resp := post(t, srv.URL+"/agui", body(fmt.Sprint("cap", i), "r", ""))
		_, err := bufio.NewReader(resp.Body).ReadString('\n')
		require.NoError(t, err)
		open = append(open, resp)
	}
	st, code, h := do(t, http.MethodPost, srv.URL+"/agui", body("cap-x", "r", ""), "Content-Type", "application/json")
	assert.Equal(t, http.StatusServiceUnavailable, st)
	assert.Equal(t, "TOO_MANY_RUNS", code)
	assert.NotEmpty(t, h.Get("Retry-After"))
	assert.Equal(t, 2, e.Active())
	for _, r := range open {
		r.Body.Close()
	}
	require.Eventually(t, func() bool { return e.Active() == 0 }, 10*time.Second, 5*time.Millisecond)
	st, _, _ = do(t, http.MethodPost, srv.URL+"/agui/threads/cap-x/runs/r/stop", "", "Content-Type", "application/json")
	assert.Equal(t, http.StatusNotFound, st, "the refused run left nothing behind")
}

func TestTricklingBodyIsCutOff(t *testing.T) {
	srv, e := newTestServer(t, released(), Config{BodyReadTimeout: 200 * time.Millisecond})
	conn, err := net.Dial("tcp", strings.TrimPrefix(srv.URL, "http://"))
	require.NoError(t, err)
	defer conn.Close()
	b := body("slow", "r", "")
	_, err = fmt.Fprintf(conn, "POST /agui HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(b), b[:10])
	require.NoError(t, err)
	// No deadline on our side beyond a generous safety net: the server must answer.
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(30*time.Second)))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	require.NoError(t, err)
	defer resp.Body.Close()
	assert.Equal(t, http.StatusRequestTimeout, resp.StatusCode)
	assert.Equal(t, 0, e.Active())
}

// TestBodyReadTimeoutSparesLongStreams: the body read deadline is lifted once the body is
// read, so a run streams on past it (a whole-request ReadTimeout would cancel it).
func TestBodyReadTimeoutSparesLongStreams(t *testing.T) {
	release := make(chan struct{})
	srv, e := newTestServer(t, blockingModel{release: release}, Config{BodyReadTimeout: 50 * time.Millisecond})
	resp := post(t, srv.URL+"/agui", body("long", "r", ""))
	defer resp.Body.Close()
	_, err := bufio.NewReader(resp.Body).ReadString('\n')
	require.NoError(t, err)
	time.Sleep(300 * time.Millisecond) // several body read timeouts
	require.Equal(t, 1, e.Active(), "the run outlived the body read timeout")
	close(release)
	evs := readEvents(t, resp)
	require.NotEmpty(t, evs)
	assert.Equal(t, "RUN_FINISHED", evs[len(evs)-1]["type"])
}

// TestPercentEncodedIDsOnEveryRoute: a threadId (and runId) sent percent-encoded, as the chat
// page's encodeURIComponent does for ':', reaches every route decoded: GET thread, GET
// events, stop and DELETE all find the thread that the plain id names.
func TestPercentEncodedIDsOnEveryRoute(t *testing.T) {
	srv, e := newTestServer(t, released(), Config{})
	const thread, run = "enc:thread.1", "run:1"
	resp := post(t, srv.URL+"/agui", body(thread, run, ""))
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	require.Eventually(t, func() bool { return e.Active() == 0 }, 10*time.Second, 5*time.Millisecond)

	esc := func(s string) string { return strings.ReplaceAll(url.PathEscape(s), ":", "%3A") }
	base := srv.URL + "/agui/threads/" + esc(thread)
	st, code, _ := do(t, http.MethodGet, base, "")
	assert.Equal(t, http.StatusOK, st, "GET thread: %s", code)
	st, code, _ = do(t, http.MethodGet, base+"/runs/"+esc(run)+"/events", "")
	assert.Equal(t, http.StatusOK, st, "GET events: %s", code)
	st, code, _ = do(t, http.MethodPost, base+"/runs/"+esc(run)+"/stop", "", "Content-Type", "application/json")
	assert.Equal(t, http.StatusConflict, st, "stop of the finished run: %s", code)
	assert.Equal(t, "RUN_FINISHED", code)
	st, code, _ = do(t, http.MethodDelete, base, "")
	assert.Equal(t, http.StatusNoContent, st, "DELETE: %s", code)
	st, _, _ = do(t, http.MethodGet, srv.URL+"/agui/threads/"+thread, "")
	assert.Equal(t, http.StatusNotFound, st, "the thread is gone")
}
