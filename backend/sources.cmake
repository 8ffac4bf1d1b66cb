# backend/'s source lists (absolute paths), used by backend/CMakeLists.txt and by the sibling projects
# (tests/sanitizers, tests/asan, tests/torch2). Three lists, because the torch-free builds take only the first two:
#   SLUICE_BACKEND_SEAM_SOURCES           the Backend seam, the sim inference device and the token sampler (what the
#                                         scheduler needs)
#   SLUICE_BACKEND_SIM_GENERATION_SOURCES the generation inputs and the sim generation device
#   SLUICE_BACKEND_CORE_SOURCES           both: sluice_backend_core (torch-free)
#   SLUICE_BACKEND_TORCH_SOURCES          sluice_backend: libtorch (cpu/cuda/neuron), the factories, the repository
# The libnrt backend's list is backend/nrt/sources.cmake (SLUICE_NRT_SOURCES).
set(SLUICE_BACKEND_SEAM_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/backend.cc
  ${CMAKE_CURRENT_LIST_DIR}/sim_backend.cc
  ${CMAKE_CURRENT_LIST_DIR}/sim_faults.cc
  ${CMAKE_CURRENT_LIST_DIR}/sampler.cc  # TokenPick's rules: the engine's host sampling and the sim device's picks
)
set(SLUICE_BACKEND_SIM_GENERATION_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/generation_inputs.cc
  ${CMAKE_CURRENT_LIST_DIR}/sim_generation_backend.cc
)
set(SLUICE_BACKEND_CORE_SOURCES ${SLUICE_BACKEND_SEAM_SOURCES} ${SLUICE_BACKEND_SIM_GENERATION_SOURCES})
set(SLUICE_BACKEND_TORCH_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/backend_factory.cc
  ${CMAKE_CURRENT_LIST_DIR}/generation_backend_factory.cc
  ${CMAKE_CURRENT_LIST_DIR}/torch_device.cc
  ${CMAKE_CURRENT_LIST_DIR}/torch_weights.cc
  ${CMAKE_CURRENT_LIST_DIR}/torch_backend.cc
  ${CMAKE_CURRENT_LIST_DIR}/torch_generation_backend.cc
  ${CMAKE_CURRENT_LIST_DIR}/torch_token_pick.cc       # DecodeInput::picks on the device: Sampler's rules in torch ops
  ${CMAKE_CURRENT_LIST_DIR}/torch_stream_step_backend.cc
  ${CMAKE_CURRENT_LIST_DIR}/neuron_runtime.cc
  ${CMAKE_CURRENT_LIST_DIR}/neuron_placement.cc
  ${CMAKE_CURRENT_LIST_DIR}/model_repository.cc
  ${CMAKE_CURRENT_LIST_DIR}/reference_set.cc
)
