package main

import (
	"bufio"
	"encoding/json"
	"io"

	sigsyaml "sigs.k8s.io/yaml"
)

// runYAML answers, for each input line (a JSON string holding YAML text), what
// Kyverno's YAML readers make of it: sigs.k8s.io/yaml's YAMLToJSON (behind its
// CEL yaml.parse, JMESPath parse_yaml and YAML patchesJson6902), decoded as
// Go's any: {"value": ...} or {"error": "..."}.
func runYAML(in io.Reader, out io.Writer) int {
	scanner := bufio.NewScanner(in)
	scanner.Buffer(make([]byte, 1<<20), 1<<26)
	writer := bufio.NewWriter(out)
	defer writer.Flush()
	for scanner.Scan() {
		var text string
		answer := map[string]any{}
		if err := json.Unmarshal(scanner.Bytes(), &text); err != nil {
			answer["error"] = "input is not a JSON string: " + err.Error()
		} else if converted, err := sigsyaml.YAMLToJSON([]byte(text)); err != nil {
			answer["error"] = err.Error()
		} else {
			var value any
			if err := json.Unmarshal(converted, &value); err != nil {
				answer["error"] = err.Error()
			} else {
				answer["value"] = value
			}
		}
		encoded, _ := json.Marshal(answer)
		writer.Write(encoded)
		writer.WriteByte('\n')
	}
	if scanner.Err() != nil {
		return 1
	}
	return 0
}
