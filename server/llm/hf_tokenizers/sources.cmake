# The Hugging Face tokenizer + Jinja chat-template support (this folder), for any CMake project that compiles
# server/llm: include() this file, then sluice_add_hf_tokenizers(<target>) adds the C++ wrappers to <target> and links
# the Rust static library that `cargo build --release --locked` makes (CARGO_TARGET_DIR inside the build tree, so
# a clean clone builds without anything outside it but crates.io). The main build, tests/asan and tests/sanitizers
# use it. SLUICE_CARGO_JOBS (cache) caps cargo's parallel jobs (empty: cargo's default, one per core);
# SLUICE_CARGO_TARGET_DIR (cache) lets the sanitizer projects reuse the main build's compiled crate.
set(SLUICE_HF_TOKENIZERS_DIR ${CMAKE_CURRENT_LIST_DIR})
set(SLUICE_CARGO_JOBS "" CACHE STRING "cargo build --jobs for the Rust tokenizer crate (empty: cargo's default)")
set(SLUICE_CARGO_TARGET_DIR ${CMAKE_BINARY_DIR}/hf_tokenizers_cargo CACHE PATH
    "cargo's target dir for the Rust tokenizer crate (another build tree's may be shared: cargo locks it)")

function(sluice_hf_tokenizers_rust_library)
  if(TARGET sluice_hf_tokenizers_rs)
    return()
  endif()
  find_program(SLUICE_CARGO cargo HINTS $ENV{HOME}/.cargo/bin REQUIRED)
  find_package(Threads REQUIRED)
  set(dir ${SLUICE_HF_TOKENIZERS_DIR})
  set(target_dir ${SLUICE_CARGO_TARGET_DIR})
  set(library ${target_dir}/release/libsluice_hf_tokenizers.a)
  set(jobs)
  if(SLUICE_CARGO_JOBS)
    set(jobs --jobs ${SLUICE_CARGO_JOBS})
  endif()
  file(GLOB rust_sources CONFIGURE_DEPENDS ${dir}/src/*.rs)
  add_custom_command(OUTPUT ${library}
    COMMAND ${CMAKE_COMMAND} -E env CARGO_TARGET_DIR=${target_dir}
            ${SLUICE_CARGO} build --release --locked ${jobs} --manifest-path ${dir}/Cargo.toml
    DEPENDS ${rust_sources} ${dir}/Cargo.toml ${dir}/Cargo.lock
    COMMENT "cargo build --release --locked (server/llm/hf_tokenizers: HF tokenizers + minijinja)"
    USES_TERMINAL VERBATIM)
  add_custom_target(sluice_hf_tokenizers_cargo DEPENDS ${library})
  add_library(sluice_hf_tokenizers_rs STATIC IMPORTED GLOBAL)
  # What Rust's standard library needs from the C library (rustc --print native-static-libs).
  set_target_properties(sluice_hf_tokenizers_rs PROPERTIES
    IMPORTED_LOCATION ${library}
    INTERFACE_LINK_LIBRARIES "Threads::Threads;${CMAKE_DL_LIBS};m;rt;util;gcc_s")
  add_dependencies(sluice_hf_tokenizers_rs sluice_hf_tokenizers_cargo)
endfunction()

function(sluice_add_hf_tokenizers target)
  sluice_hf_tokenizers_rust_library()
  target_sources(${target} PRIVATE
    ${SLUICE_HF_TOKENIZERS_DIR}/hf_tokenizer.cc          # tokenizer.json behind server/llm/tokenizer.h
    ${SLUICE_HF_TOKENIZERS_DIR}/jinja_chat_template.cc)  # tokenizer_config.json's chat_template
  target_link_libraries(${target} PRIVATE sluice_hf_tokenizers_rs)
  add_dependencies(${target} sluice_hf_tokenizers_cargo)
endfunction()
