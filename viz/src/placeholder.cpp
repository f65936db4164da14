// Placeholder so the target exists until the viewer lands (issue 5).
namespace ctwin::viz {}
