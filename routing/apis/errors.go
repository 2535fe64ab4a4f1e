package apis

import "fmt"

// Error classes: the kind of answer vLLM gives a request it refuses while parsing or converting
// it (all HTTP 400 or 422). The router forwards such a request on load alone; the worker answers it.
const (
	ClassPydantic       = "pydantic.ValidationError"
	ClassVLLMValidation = "VLLMValidationError"
	ClassInvalidRequest = "ErrorResponse 400 invalid_request_error"
	ClassValueError     = "ValueError (HTTP 400)"
)

// Error is a request vLLM would refuse: Class is one of the Class constants.
type Error struct {
	Class string
	Msg   string
}

func (e *Error) Error() string { return e.Class + ": " + e.Msg }

func invalid(format string, args ...any) error {
	return &Error{Class: ClassPydantic, Msg: fmt.Sprintf(format, args...)}
}

func vllmInvalid(format string, args ...any) error {
	return &Error{Class: ClassVLLMValidation, Msg: fmt.Sprintf(format, args...)}
}
