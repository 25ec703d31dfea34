// Extra dev_utils actions: none in the extension as installed. The
// end-to-end tests' build of the extension (testbrowser.BuildExtension)
// puts extension/test/overlay/tools/dev_utils_extra.js here instead, with
// native_echo_benchmark, whose echo host only the tests register.
//
// Each action: {description, properties (JSON Schema of its arguments),
// run(args, ctx) → CallToolResult}; a failure throws an Error whose message
// the tool error carries.

export default {};
