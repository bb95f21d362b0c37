package httpd

import (
	"reflect"
	"strings"
	"testing"

	"github.com/linkraft/linkraft/httpd/compat"
)

// TestAdaptersReadTheLinkJSONAsItIs: the compatible APIs read linkraft's
// link JSON into a type of their own (compat.Link). Every field they read
// must be one linkraft's read and list answers carry, under the same name
// and with the same JSON shape: a renamed or retyped field fails here, not
// as an empty value in a client's answer.
func TestAdaptersReadTheLinkJSONAsItIs(t *testing.T) {
	for _, mismatch := range shapeMismatches("link", reflect.TypeFor[compat.Link](), reflect.TypeFor[linkReadJSON]()) {
		t.Error(mismatch)
	}
	// And the test itself tells a difference.
	type renamed struct {
		Code string `json:"code"`
	}
	type retyped struct {
		ID string `json:"id"`
	}
	for _, probe := range []reflect.Type{reflect.TypeFor[renamed](), reflect.TypeFor[retyped]()} {
		if len(shapeMismatches("probe", probe, reflect.TypeFor[linkReadJSON]())) == 0 {
			t.Errorf("%v reads as the link JSON, but it is not", probe)
		}
	}
}

// shapeMismatches lists the fields of reader (by JSON name) that writer
// does not carry with the same JSON shape.
func shapeMismatches(path string, reader, writer reflect.Type) []string {
	if reader.Kind() != writer.Kind() {
		return []string{path + ": " + reader.String() + " read from " + writer.String()}
	}
	switch reader.Kind() {
	case reflect.Pointer, reflect.Slice:
		return shapeMismatches(path+"[]", reader.Elem(), writer.Elem())
	case reflect.Map:
		return append(shapeMismatches(path+"{key}", reader.Key(), writer.Key()),
			shapeMismatches(path+"{}", reader.Elem(), writer.Elem())...)
	case reflect.Struct:
		written := jsonFields(writer)
		var out []string
		for name, field := range jsonFields(reader) {
			w, ok := written[name]
			if !ok {
				out = append(out, path+"."+name+": not in linkraft's JSON")
				continue
			}
			out = append(out, shapeMismatches(path+"."+name, field, w)...)
		}
		return out
	}
	return nil
}

// jsonFields is t's fields by JSON name, embedded structs' fields
// included, as encoding/json sees them.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for _, f := range reflect.VisibleFields(t) {
		if !f.IsExported() || (f.Anonymous && f.Type.Kind() == reflect.Struct) {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = f.Type
	}
	return out
}
