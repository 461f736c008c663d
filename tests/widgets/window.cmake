# Main window, panels, sessions and the --session/--screenshot mode (runs the real attnscope binary).
attnscope_add_widget_test(test_window test_window.cpp test_window_session.cpp test_window_sweep.cpp)
target_compile_definitions(test_window PRIVATE ATTNSCOPE_BINARY="$<TARGET_FILE:attnscope>")
target_link_libraries(test_window PRIVATE Qt6::Test)
add_dependencies(test_window attnscope)
# Progress and Cancel during a long dense SVD (prints the cancel latency).
attnscope_add_widget_test(test_window_cancel test_window_cancel.cpp)
target_link_libraries(test_window_cancel PRIVATE Qt6::Test)
