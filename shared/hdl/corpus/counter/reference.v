// Reference counter: the next value is computed combinationally, the register only holds it.
module counter (
    input  wire       clk,
    input  wire       rst,
    input  wire       en,
    output wire [7:0] count
);
    reg  [7:0] value;
    wire [7:0] next = rst ? 8'h00 : value + {7'b0000000, en};

    always @(posedge clk)
        value <= next;

    assign count = value;
endmodule
