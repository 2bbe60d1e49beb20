#include <string>

std::string packswap_odr_a();
std::string packswap_odr_b();

int main() {
  return packswap_odr_a() == packswap_odr_b() ? 0 : 1;
}
