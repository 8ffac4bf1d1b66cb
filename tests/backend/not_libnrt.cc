// A shared library that is not libnrt (no nrt_* symbols): nrt_backend_test's neuron_library for the
// missing-symbol error.
extern "C" int not_libnrt_marker() { return 1; }
