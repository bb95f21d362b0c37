package migrate

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// eachJSONItem calls fn for every element of the array (or every value of
// the object) under key in each top-level JSON object of data, with the
// line the element starts on. data may hold several documents one after
// another, as saving page after page of an API's answer gives; a top-level
// array is taken as the list itself.
func eachJSONItem(data []byte, key string, fn func(line int, raw json.RawMessage)) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	found := false
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("not JSON: %w", err)
		}
		switch tok {
		case json.Delim('['):
			if err := eachElement(dec, data, ']', fn); err != nil {
				return err
			}
			found = true
		case json.Delim('{'):
			for dec.More() {
				k, err := dec.Token()
				if err != nil {
					return fmt.Errorf("not JSON: %w", err)
				}
				if k != key {
					var skip json.RawMessage
					if err := dec.Decode(&skip); err != nil {
						return fmt.Errorf("not JSON: %w", err)
					}
					continue
				}
				open, err := dec.Token()
				if err != nil {
					return fmt.Errorf("not JSON: %w", err)
				}
				switch open {
				case json.Delim('['):
					err = eachElement(dec, data, ']', fn)
				case json.Delim('{'):
					err = eachElement(dec, data, '}', fn)
				case nil: // an empty list, as some APIs write it
				default:
					err = fmt.Errorf("%q is not a list", key)
				}
				if err != nil {
					return err
				}
				found = true
			}
			if _, err := dec.Token(); err != nil {
				return fmt.Errorf("not JSON: %w", err)
			}
		default:
			return fmt.Errorf("want a JSON object with %q", key)
		}
	}
	if !found {
		return fmt.Errorf("no %q in the file: is it the right format?", key)
	}
	return nil
}

// eachElement reads the elements of an array or the values of an object
// whose opening delimiter was read, and its closing one.
func eachElement(dec *json.Decoder, data []byte, end byte, fn func(int, json.RawMessage)) error {
	for dec.More() {
		if end == '}' {
			if _, err := dec.Token(); err != nil { // the member's name
				return fmt.Errorf("not JSON: %w", err)
			}
		}
		// InputOffset is just past the previous token: skip to the value.
		off := dec.InputOffset()
		for off < int64(len(data)) && strings.IndexByte(" \t\r\n,:", data[off]) >= 0 {
			off++
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return fmt.Errorf("not JSON at line %d: %w", lineAt(data, off), err)
		}
		fn(lineAt(data, off), raw)
	}
	_, err := dec.Token()
	return err
}

// flexInt is a count that APIs write as a number or as a string of digits
// (YOURLS's database driver gives strings).
type flexInt int64

func (n *flexInt) UnmarshalJSON(b []byte) error {
	s := strings.Trim(string(b), `"`)
	if s == "" || s == "null" {
		*n = 0
		return nil
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return errors.New("not a whole number: " + string(b))
	}
	*n = flexInt(v)
	return nil
}
