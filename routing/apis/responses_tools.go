package apis

// Tools of a Responses request as the chat template sees them: iter_response_function_tool_dicts
// (vllm/tool_parsers/utils.py) and construct_tool_dicts (responses/utils.py): function tools,
// and the function tools of a namespace under the name "<namespace>__<name>"; built-in tools
// (web search, file search, MCP, ...) are not given to the template. check_tool_usage
// (responses/protocol.py) decides tool_choice.

// responsesTools returns the template's tool list (nil when the request has no tools, [] when
// it has only built-in ones) and the names a named tool_choice may use.
func responsesTools(ts *Value) (*Value, map[string]bool, error) {
	names := map[string]bool{}
	if ts.IsNull() {
		return nil, names, nil
	}
	if !ts.IsArr() {
		return nil, nil, invalid("tools must be a list")
	}
	if len(ts.Arr) == 0 {
		return nil, names, nil
	}
	list := Arr()
	for _, t := range ts.Arr {
		if !t.IsObj() {
			return nil, nil, invalid("tools must be objects")
		}
		switch t.Get("type").StrOr("") {
		case "function":
			if !t.Get("name").IsStr() {
				return nil, nil, invalid("function tool needs a name")
			}
			names[t.Get("name").Str] = true
			list.Arr = append(list.Arr, functionTool(t.Get("name"), t.Get("description"), t.Get("parameters"), t.Get("strict"), t.Get("defer_loading")))
		case "namespace":
			ns := t.Get("name").StrOr("")
			for _, sub := range t.Get("tools").Arr {
				if sub.Get("type").StrOr("") != "function" {
					continue
				}
				short := sub.Get("name").StrOr("")
				names[short], names[ns+"__"+short] = true, true
				list.Arr = append(list.Arr, functionTool(Str(ns+"__"+short), sub.Get("description"), sub.Get("parameters"), sub.Get("strict"), sub.Get("defer_loading")))
			}
		}
	}
	return list, names, nil
}

// responsesToolChoice: with no tools "auto" and "none" become "none", and "required" or a named
// function is refused; with tools the value stays (default "auto"), a named function must be one
// of them.
func responsesToolChoice(tc, tools *Value, names map[string]bool) (*Value, error) {
	if tc.IsNull() {
		tc = Str("auto")
	}
	noTools := tools.IsNull() || (tools.IsArr() && len(tools.Arr) == 0)
	if tc.IsStr() {
		switch tc.Str {
		case "required":
			if noTools {
				return nil, vllmInvalid("Tool choice 'required' must be specified with 'tools' parameter.")
			}
		case "auto", "none":
			if noTools {
				return Str("none"), nil
			}
		}
		return tc, nil
	}
	if tc.Get("type").StrOr("") == "function" && !names[tc.Get("name").StrOr("")] {
		return nil, vllmInvalid("Tool choice 'function' not found in 'tools' parameter.")
	}
	return tc, nil
}
