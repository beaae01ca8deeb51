package agui

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// everyEvent has one value of every event type this package defines. The hand encoder
// (appendEvent) is checked against an encoding derived from the structs' json tags alone, so a
// field added to an event (or to a type inside one) that the encoder does not write fails
// TestEncoderWritesEveryField, and an event type added without a line here fails
// TestEveryEventTypeIsChecked.
var everyEvent = []Event{
	&RunStarted{}, &RunFinished{}, &RunError{},
	&StepStarted{}, &StepFinished{},
	&TextMessageStart{}, &TextMessageContent{}, &TextMessageEnd{},
	&ToolCallStart{}, &ToolCallArgs{}, &ToolCallEnd{}, &ToolCallResult{},
	&StateSnapshot{}, &StateDelta{}, &MessagesSnapshot{}, &ActivitySnapshot{}, &Custom{},
	&SubagentStarted{}, &SubagentFinished{}, &SubagentError{},
}

func TestEveryEventTypeIsChecked(t *testing.T) {
	t.Parallel()
	seen := map[EventType]bool{}
	for _, ev := range everyEvent {
		seen[ev.EventType()] = true
	}
	for typ := range knownTypes {
		assert.True(t, seen[typ], "event type %s is not in everyEvent", typ)
	}
	assert.Len(t, everyEvent, len(knownTypes))
}

// TestEncoderWritesEveryField fills every field of every event, recursively (strings, numbers,
// booleans, pointers, slices, maps and values of type any all set), and compares what the hand
// encoder writes with the tag-derived encoding, as JSON values (key order aside).
func TestEncoderWritesEveryField(t *testing.T) {
	t.Parallel()
	for _, ev := range everyEvent {
		t.Run(string(ev.EventType()), func(t *testing.T) {
			v := reflect.New(reflect.TypeOf(ev).Elem())
			fill(v.Elem(), string(ev.EventType()))
			full := v.Interface().(Event)

			got, err := MarshalEvent(full)
			require.NoError(t, err)
			want := byTags(t, full)
			assert.JSONEq(t, string(want), string(got))

			// json.Marshal goes through the event's MarshalJSON: the same bytes.
			viaJSON, err := json.Marshal(full)
			require.NoError(t, err)
			assert.Equal(t, string(got), string(viaJSON))
		})
	}
}

// widenedEvent is TextMessageContent with one more field. Its MarshalJSON is
// TextMessageContent's (promoted), which knows nothing of Extra: exactly the silent drop the
// check exists to catch.
type widenedEvent struct {
	TextMessageContent
	Extra string `json:"extra"`
}

func TestFieldCheckCatchesADroppedField(t *testing.T) {
	t.Parallel()
	ev := &widenedEvent{}
	fill(reflect.ValueOf(ev).Elem(), "widened")
	got, err := MarshalEvent(ev)
	require.NoError(t, err)
	want := byTags(t, ev)
	var gotV, wantV map[string]any
	require.NoError(t, json.Unmarshal(got, &gotV))
	require.NoError(t, json.Unmarshal(want, &wantV))
	assert.Equal(t, "s-widened.Extra", wantV["extra"], "the tag-derived encoding has the new field")
	assert.NotContains(t, gotV, "extra", "the encoder drops it")
	assert.NotEqual(t, wantV, gotV, "so the comparison fails")
}

// fill sets every field reachable from v to a value that is not its zero value, and that
// differs between fields (strings carry their path), so a field written under another's key
// is noticed too.
func fill(v reflect.Value, path string) {
	switch v.Kind() {
	case reflect.String:
		v.SetString("s-" + path)
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(int64(len(path)) + 1)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(uint64(len(path)) + 1)
	case reflect.Float32, reflect.Float64:
		v.SetFloat(float64(len(path)) + 0.5)
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fill(v.Elem(), path)
	case reflect.Struct:
		for i := range v.NumField() {
			if f := v.Type().Field(i); f.IsExported() {
				fill(v.Field(i), path+"."+f.Name)
			}
		}
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Uint8 { // json.RawMessage and []byte: a JSON value
			v.SetBytes([]byte(`{"raw": "` + path + `"}`))
			return
		}
		s := reflect.MakeSlice(v.Type(), 1, 1)
		fill(s.Index(0), path+"[0]")
		v.Set(s)
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		k := reflect.New(v.Type().Key()).Elem()
		fill(k, path+".key")
		e := reflect.New(v.Type().Elem()).Elem()
		fill(e, path+"[key]")
		m.SetMapIndex(k, e)
		v.Set(m)
	case reflect.Interface:
		v.Set(reflect.ValueOf(map[string]any{"any": path}))
	default:
		panic("fill: unhandled kind " + v.Kind().String() + " at " + path)
	}
}

// byTags encodes ev from its struct tags by reflection, the way encoding/json would if no type
// in it had a MarshalJSON method (every exported field under its tag name, or its Go name;
// embedded structs without a tag flattened; "-" skipped; omitempty honoured), plus the wire
// "type", which no struct holds.
func byTags(t *testing.T, ev Event) []byte {
	t.Helper()
	tree := tagTree(reflect.ValueOf(ev)).(map[string]any)
	tree["type"] = string(ev.EventType())
	b, err := json.Marshal(tree)
	require.NoError(t, err)
	return b
}

// tagTree turns v into maps, slices and scalars that encoding/json writes by itself.
func tagTree(v reflect.Value) any {
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			return nil
		}
		return tagTree(v.Elem())
	case reflect.Interface:
		if v.IsNil() {
			return nil
		}
		return tagTree(v.Elem())
	case reflect.Struct:
		out := map[string]any{}
		tagFields(v, out)
		return out
	case reflect.Slice:
		if v.IsNil() {
			return nil
		}
		if v.Type().Elem().Kind() == reflect.Uint8 {
			return json.RawMessage(v.Bytes())
		}
		out := make([]any, v.Len())
		for i := range out {
			out[i] = tagTree(v.Index(i))
		}
		return out
	case reflect.Map:
		if v.IsNil() {
			return nil
		}
		out := map[string]any{}
		for it := v.MapRange(); it.Next(); {
			out[it.Key().String()] = tagTree(it.Value())
		}
		return out
	default:
		return v.Interface()
	}
}

func tagFields(v reflect.Value, out map[string]any) {
	for i := range v.NumField() {
		f := v.Type().Field(i)
		if !f.IsExported() {
			continue
		}
		name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		fv := v.Field(i)
		if f.Anonymous && name == "" && fv.Kind() == reflect.Struct {
			tagFields(fv, out)
			continue
		}
		if name == "" {
			name = f.Name
		}
		if strings.Contains(","+opts+",", ",omitempty,") && isEmpty(fv) {
			continue
		}
		out[name] = tagTree(fv)
	}
}

// isEmpty is encoding/json's omitempty rule.
func isEmpty(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Array, reflect.Map, reflect.Slice, reflect.String:
		return v.Len() == 0
	case reflect.Pointer, reflect.Interface:
		return v.IsNil()
	default:
		return v.IsZero()
	}
}
