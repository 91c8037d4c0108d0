// C++: inlined member functions reach their names through
// DW_AT_abstract_origin -> DW_AT_specification -> the in-class declaration.
namespace ns {
struct Counter {
	volatile int n;
	inline __attribute__((always_inline)) void bump(int by) { n = n + by; n = n ^ by; }
};
}

ns::Counter counter;

__attribute__((noinline)) void work(int x)
{
	counter.bump(x);
	counter.bump(x * 3);
	counter.bump(x ^ 5);
}

int main(int argc, char **)
{
	work(argc);
	return 0;
}
