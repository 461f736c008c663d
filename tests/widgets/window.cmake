# Main window, panels, sessions and the --session/--screenshot mode (runs the real attnscope binary).
attnscope_add_widget_test(test_window test_window.cpp test_window_session.cpp test_window_sweep.cpp)
target_compile_definitions(test_window PRIVATE ATTNSCOPE_BINARY="$<TARGET_FILE:attnscope>")
target_link_libraries(test_window PRIVATE Qt6::Test)
add_dependencies(test_window attnscope)
